task "notify_empty" {
  notify {
    url    = "https://ops:secret@hooks.example.org/lhengine"  # ERROR: Invalid notify URL
    events = []                                             # ERROR: Empty event list
  }
  step "a" {
    plugin = "../plugins/dummy.wasm"
  }
}
