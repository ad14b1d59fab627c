task "effects" {
  step "a" {
    plugin = "../plugins/dummy.wasm"
    effect "http" {
      hosts = ["127.0.0.1:*"]
      mode  = "check"  # ERROR: Missing check URL
    }
    effect "file" {
      mode = "resend"
    }
    effect "http" {  # ERROR: Duplicate effect kind
      hosts = ["example.org"]
    }
    effect "email" {  # ERROR: Unknown effect kind
      mode = "manual"
    }
  }
  step "b" {
    plugin = "../plugins/dummy.wasm"
    effect "http" {  # ERROR: Missing required argument
      mode = "retry"  # ERROR: Invalid effect mode
    }
    effect "file" {
      hosts     = ["example.org"]                  # ERROR: Unsupported argument
      check_url = "http://127.0.0.1:8080/applied"  # ERROR: Check URL without check mode
    }
  }
  step "c" {
    plugin = "../plugins/dummy.wasm"
    effect "http" {
      hosts     = ["127.0.0.1:0"]              # ERROR: Invalid host pattern
      mode      = "check"
      check_url = "ftp://127.0.0.1/applied"    # ERROR: Invalid check URL
    }
    effect "file" {
      mode      = "check"
      check_url = "http://127.0.0.1:8080/applied?kind=file"  # ERROR: Invalid check URL
    }
  }
  step "d" {
    plugin = "../plugins/dummy.wasm"
    effect "http" {
      hosts = []  # ERROR: Empty host list
      mode  = var.mode  # ERROR: Variables not allowed
    }
  }
}
