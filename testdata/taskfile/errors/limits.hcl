task "limits" {
  limits {
    notes                     = -1        # ERROR: Invalid limit
    note_bytes                = "1MiBx"   # ERROR: Invalid limit
    counter_names_per_attempt = 1.5       # ERROR: Incorrect attribute value type
    counter_names             = 2000000   # ERROR: Invalid limit
    log_passthrough           = "2048GiB" # ERROR: Invalid limit
    kv_bytes                  = true      # ERROR: Invalid limit
    artifact_bytes            = "1GiB"
    output_bytes              = 0
    disk_bytes                = 1         # ERROR: Unsupported argument
  }
  limits {  # ERROR: Duplicate limits block
    notes = 10
  }
  step "a" {
    plugin = "../plugins/dummy.wasm"
  }
}
