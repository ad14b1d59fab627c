task "sandbox" {
  step "a" {
    plugin     = "../plugins/dummy.wasm"
    workspace  = "readonly"  # ERROR: Invalid workspace
    host_calls = -1          # ERROR: Invalid host call budget
    mount "data" {
      source = "../valid/data"
    }
    mount "data" {  # ERROR: Duplicate mount
      source = "../valid/data"
    }
    mount "2nd" {  # ERROR: Invalid mount name
      source = "../valid/data"
    }
    mount "missing" {
      source = "./no-such-dir"  # ERROR: Mount source not found
    }
    mount "file" {
      source = "../plugins/dummy.wasm"  # ERROR: Mount source is not a directory
    }
    mount "empty" {
      source = ""  # ERROR: Empty mount source
    }
    mount "nosource" {  # ERROR: Missing required argument
    }
  }
  step "b" {
    plugin     = "../plugins/dummy.wasm"
    workspace  = var.workspace  # ERROR: Variables not allowed
    host_calls = 1.5            # ERROR: Incorrect attribute value type
  }
}
