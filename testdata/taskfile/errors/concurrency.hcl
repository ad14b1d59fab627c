task "concurrency" {
  step "a" {
    plugin      = "../plugins/dummy.wasm"
    concurrency = 4  # ERROR: Concurrency without for_each
  }
  step "b" {
    plugin      = "../plugins/dummy.wasm"
    for_each    = ["x", "y"]
    concurrency = 0  # ERROR: Invalid concurrency
  }
}
