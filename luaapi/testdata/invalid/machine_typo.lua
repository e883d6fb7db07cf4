if machine.gpu >= 4 then
  job "big" { cmd = "./big", gpus = 4 }
end
