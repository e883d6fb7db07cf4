-- Model servers that each need a slice of a card, not a card: gpu_mem
-- shares one card by memory. Each is placed on a card with that much
-- memory neither booked by another share nor in use outside berth (what
-- the driver, NVML, says; or berth daemon --gpu-mem SIZE for each card),
-- so three of them fit where whole cards would take three.
-- CUDA_VISIBLE_DEVICES names the card; JAX is told its part
-- (XLA_PYTHON_CLIENT_MEM_FRACTION), TensorFlow to grow instead of taking
-- the card (TF_FORCE_GPU_ALLOW_GROWTH), and BERTH_GPU_MEM says the share
-- in bytes, for torch.cuda.set_per_process_memory_fraction.
flavor "gpu-slice" { cpus = 2, gpu_mem = "16G", ram = "16G" }

for _, model in ipairs { "llama-8b", "mistral-7b", "qwen-7b" } do
  job ("serve-" .. model) {
    cmd = { "python3", "serve.py", "--model", model, "--port", "0" },
    dir = "/srv/ml/serve",
    flavor = "gpu-slice",
    restart = "always",
    description = "Inference for " .. model .. " on a 16G slice of a card",
  }
end
