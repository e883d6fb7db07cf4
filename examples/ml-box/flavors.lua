-- Sizes for a shared GPU box. A job on "gpu-small" gets one card, 8 cores
-- and 32G: CUDA_VISIBLE_DEVICES names its card, OMP_NUM_THREADS and friends
-- say 8, so the frameworks size themselves to their share, not the box.
flavor "gpu-small" { cpus = 8, gpus = 1, ram = "32G" }
flavor "gpu-large" { cpus = 16, gpus = 2, ram = "96G" }
flavor "cpu-prep"  { cpus = 4, ram = "16G" }
