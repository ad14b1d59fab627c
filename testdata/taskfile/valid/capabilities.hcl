# Every capability a step may be granted, spelled out.
task "capabilities" {
  step "notify" {
    plugin = "../plugins/dummy.wasm"

    http {
      allow     = ["127.0.0.1:8080", "docs.example.org", "[::1]:*"]
      max_bytes = "1MiB"
      timeout   = "10s"
    }

    effect "http" {
      hosts     = ["127.0.0.1:*"]
      mode      = "check"
      check_url = "http://127.0.0.1:8080/applied"
    }
    effect "file" {
      mode = "resend"
    }

    workspace = "ro"
    mount "data" {
      source = "./data"
    }
    host_calls = 10000
  }

  step "sealed" {
    plugin    = "../plugins/dummy.wasm"
    input     = step.notify.output
    workspace = "none"
  }
}
