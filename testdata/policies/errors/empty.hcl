# ERROR: Missing policy block
