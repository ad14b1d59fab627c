task "cycle" {
  step "a" {
    plugin = "../plugins/dummy.wasm"
    input  = step.b.output  # ERROR: Reference to a later step
  }
  step "b" {
    plugin   = "../plugins/dummy.wasm"
    for_each = step.b.output.items  # ERROR: Self-referential step
  }
}
