task "objective" {
  objective   = "Audit ${var.site}"  # ERROR: Variables not allowed
  constraints = "report only"  # ERROR: Incorrect attribute value type
  step "a" {
    plugin = "../plugins/dummy.wasm"
  }
}
