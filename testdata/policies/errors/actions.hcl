policy "actions" {
  version    = 1
  assumption = "x"
  evidence {
    text = "y"
  }
  steps  = "[" # ERROR: Invalid step pattern
  params = ["not", "an", "object"] # ERROR: Incorrect attribute value type

  insert "both" {
    before = "a"
    after  = "b" # ERROR: Conflicting insert anchors
    plugin = "p.wasm"
  }
  insert "neither" { # ERROR: Missing insert anchor
    plugin = "p.wasm"
  }
  insert "no-plugin" { # ERROR: Missing required argument
    after = "a"
  }
  insert "bad step" { # ERROR: Invalid step name
    after   = "a"
    plugin  = "p.wasm"
    timeout = "soon" # ERROR: Invalid duration
  }
  insert "both" { # ERROR: Duplicate insert
    after  = "a"
    plugin = "p.wasm"
  }
  override { # ERROR: Missing required argument
    attempts = 2
  }
  override { # ERROR: Empty override
    steps = "*"
  }
  override {
    steps      = "*"
    attempts   = 0 # ERROR: Invalid retry attempts
    repair_max = -1 # ERROR: Invalid repair budget
    timeout    = "0s" # ERROR: Invalid duration
    memory     = "1KiB" # ERROR: Invalid memory size
  }
}
