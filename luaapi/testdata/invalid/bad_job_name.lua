job "Train" { cmd = "./train" }
job "-dash" { cmd = "./train" }
job "a-name-that-goes-on-and-on-and-on-for-far-too-long-to-be-a-job-name" { cmd = "./train" }
job "" { cmd = "./train" }
