# ERROR: Missing task block
# A file with no task in it.
