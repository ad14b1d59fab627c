task "http" {
  step "a" {
    plugin = "../plugins/dummy.wasm"
    http {
      allow = [
        "127.0.0.1:8080",
        "https://docs.example.org",  # ERROR: Invalid host pattern
        "docs.example.org/guide",    # ERROR: Invalid host pattern
        "*.example.org",             # ERROR: Invalid host pattern
        "*",                         # ERROR: Invalid host pattern
        "example.org:http",          # ERROR: Invalid host pattern
        "example.org:70000",         # ERROR: Invalid host pattern
        "::1",                       # ERROR: Invalid host pattern
        "",                          # ERROR: Invalid host pattern
      ]
      max_bytes = "1 TiB"  # ERROR: Invalid size
      timeout   = "0s"     # ERROR: Invalid duration
    }
  }
  step "b" {
    plugin = "../plugins/dummy.wasm"
    http {
      allow     = []        # ERROR: Empty host list
      max_bytes = 0         # ERROR: Invalid size
      timeout   = "soon"    # ERROR: Invalid duration
    }
    http { allow = ["example.org"] }  # ERROR: Duplicate http block
  }
  step "c" {
    plugin = "../plugins/dummy.wasm"
    http {  # ERROR: Missing required argument
      max_bytes = "1MiB"
    }
  }
  step "d" {
    plugin = "../plugins/dummy.wasm"
    http {
      allow = ["example.org:${task.name}"]  # ERROR: Variables not allowed
    }
  }
}
