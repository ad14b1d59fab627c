task "notify" {
  notify {
    url = "ftp://127.0.0.1:8025/hook"  # ERROR: Invalid notify URL
    events = [
      "paused",
      "succeded",  # ERROR: Unknown event
      "paused",    # ERROR: Duplicate event
    ]
    retries = 3  # ERROR: Unsupported argument
  }
  notify {  # ERROR: Duplicate notify block
    url    = "http://127.0.0.1:8025/hook"
    events = ["failed"]
  }
  step "a" {
    plugin = "../plugins/dummy.wasm"
  }
}
