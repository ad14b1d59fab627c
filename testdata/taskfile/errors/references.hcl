task "refs" {
  variable "site" {}
  step "a" {
    plugin = "../plugins/dummy.wasm"
    input = {
      s = var.sight  # ERROR: Reference to undeclared variable
      t = task.owner  # ERROR: Unsupported task attribute
      u = site  # ERROR: Invalid reference
    }
  }
  step "b" {
    plugin = "../plugins/dummy.wasm"
    input = {
      x = step.fech.output  # ERROR: Reference to undeclared step
      y = step.a.outputs  # ERROR: Unsupported step attribute
      z = step.a  # ERROR: Invalid reference
    }
  }
}
