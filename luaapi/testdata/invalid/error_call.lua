if machine.gpus < 8 then
  error("this file needs a machine with 8 GPUs")
end
