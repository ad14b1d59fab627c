task "schema" {
  objectiv = "typo"  # ERROR: Unsupported argument
  step "a" {         # ERROR: Missing required argument
    input = {}
  }
  stage "b" {        # ERROR: Unsupported block type
  }
  step "c" {
    plugin = "../plugins/dummy.wasm"
    retry {
      attempt = 2    # ERROR: Unsupported argument
    }
  }
}
