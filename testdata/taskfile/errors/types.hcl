task "types" {
  variable "n" {
    type = number
  }
  variable "site" {
    type = string
  }
  variable "nums" {
    type    = list(number)
    default = [80, 443]
  }
  step "text" {
    plugin   = "../plugins/dummy.wasm"
    for_each = "text"  # ERROR: Invalid for_each argument
  }
  step "site" {
    plugin   = "../plugins/dummy.wasm"
    for_each = var.site  # ERROR: Invalid for_each argument
  }
  step "arity" {
    plugin = "../plugins/dummy.wasm"
    input  = upper(1, 2)  # ERROR: Too many function arguments
  }
  step "operand" {
    plugin = "../plugins/dummy.wasm"
    input  = var.n + "x"  # ERROR: Invalid operand
  }
  step "unknown_fn" {
    plugin = "../plugins/dummy.wasm"
    input  = uper(var.site)  # ERROR: Call to unknown function
  }
  step "each_type" {
    plugin   = "../plugins/dummy.wasm"
    for_each = var.nums
    input    = each.value.port  # ERROR: Unsupported attribute
  }
}
