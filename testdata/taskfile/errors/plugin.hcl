task "plugins" {
  step "empty" {
    plugin = ""  # ERROR: Empty plugin path
  }
  step "missing" {
    plugin = "../plugins/missing.wasm"  # ERROR: Plugin file not found
  }
  step "short-sum" {
    plugin        = "../plugins/dummy.wasm"
    plugin_sha256 = "93a44bbb"  # ERROR: Invalid plugin checksum
  }
  step "wrong-sum" {
    plugin        = "../plugins/dummy.wasm"
    plugin_sha256 = "0000000000000000000000000000000000000000000000000000000000000000"  # ERROR: Plugin checksum mismatch
  }
  step "dynamic" {
    plugin = "../plugins/${task.name}.wasm"  # ERROR: Variables not allowed
  }
}
