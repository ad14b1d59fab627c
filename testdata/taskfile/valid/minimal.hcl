task "minimal" {
  step "only" {
    plugin = "../plugins/dummy.wasm"
  }
}
