task "defaults" {
  variable "n" {
    type    = number
    default = "many"  # ERROR: Invalid default value for variable
  }
  variable "pages" {
    type    = list(object({ url = string }))
    default = [{ url = "a" }, { path = "b" }]  # ERROR: Invalid default value for variable
  }
  variable "t" {
    type = lisst(string)  # ERROR: Invalid type specification
  }
  step "a" {
    plugin = "../plugins/dummy.wasm"
  }
}
