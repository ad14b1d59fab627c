task "retry" {
  step "a" {
    plugin = "../plugins/dummy.wasm"
    retry {
      attempts = 0  # ERROR: Invalid retry attempts
    }
  }
  step "b" {
    plugin = "../plugins/dummy.wasm"
    retry {
      attempts = 2.5  # ERROR: Incorrect attribute value type
    }
  }
}
