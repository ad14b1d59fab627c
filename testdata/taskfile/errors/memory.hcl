task "memory" {
  step "a" {
    plugin = "../plugins/dummy.wasm"
    memory = "64MB8"  # ERROR: Invalid memory size
  }
  step "b" {
    plugin = "../plugins/dummy.wasm"
    memory = "8GiB"  # ERROR: Invalid memory size
  }
  step "c" {
    plugin = "../plugins/dummy.wasm"
    memory = "64mib"  # ERROR: Invalid memory size
  }
  step "d" {
    plugin = "../plugins/dummy.wasm"
    memory = 1.5  # ERROR: Invalid memory size
  }
}
