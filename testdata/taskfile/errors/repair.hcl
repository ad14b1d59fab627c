task "repair" {
  step "draft" {
    plugin = "../plugins/dummy.wasm"
    repair {
      restart_from = "verify"  # ERROR: Invalid repair target
    }
  }
  step "verify" {
    plugin = "../plugins/dummy.wasm"
    repair {
      restart_from = "draf"  # ERROR: Reference to undeclared step
      max          = -1  # ERROR: Invalid repair budget
    }
  }
}
