task "names" {
  variable "1st" {}  # ERROR: Invalid variable name
  step "fetch pages" {  # ERROR: Invalid step name
    plugin = "../plugins/dummy.wasm"
  }
}
