task "progress_values" {
  variable "unit" {
    default = "pages"
  }
  progress {
    unit   = var.unit                          # ERROR: Variables not allowed
    labels = { missing_title = null, ok = "" }  # ERROR: Incorrect attribute value type
    stpe   = "check"                           # ERROR: Unsupported argument
  }
  step "check" {
    plugin = "../plugins/dummy.wasm"
  }
}
