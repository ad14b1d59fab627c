task "broken" {
  step "a" {
    plugin = "../plugins/dummy.wasm"
    input  = { a = 1, b = }  # ERROR: Invalid expression
  }
}
