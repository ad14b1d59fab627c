# VAR: n=three
task "count" {
  variable "n" {  # ERROR: Invalid value for variable
    type = number
  }
  step "a" {
    plugin = "../plugins/dummy.wasm"
    input  = var.n
  }
}
