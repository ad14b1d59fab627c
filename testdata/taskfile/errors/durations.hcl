task "durations" {
  step "a" {
    plugin  = "../plugins/dummy.wasm"
    timeout = "30 seconds"  # ERROR: Invalid duration
  }
  step "b" {
    plugin  = "../plugins/dummy.wasm"
    timeout = "0s"  # ERROR: Invalid duration
    retry {
      backoff     = "10s"
      max_backoff = "5s"  # ERROR: Invalid duration
    }
  }
  step "c" {
    plugin  = "../plugins/dummy.wasm"
    timeout = 30  # ERROR: Invalid duration
  }
}
