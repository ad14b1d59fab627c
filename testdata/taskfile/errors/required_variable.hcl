task "needs-site" {
  variable "site" {  # ERROR: No value for required variable
    type = string
  }
  step "a" {
    plugin = "../plugins/dummy.wasm"
    input  = var.site
  }
}
