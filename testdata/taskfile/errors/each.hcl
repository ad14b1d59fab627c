task "each" {
  step "list" {
    plugin = "../plugins/dummy.wasm"
    input  = each.value  # ERROR: Reference to "each" in a step without for_each
  }
  step "fan" {
    plugin   = "../plugins/dummy.wasm"
    for_each = [each.key]  # ERROR: Invalid reference to "each"
    input    = each.item  # ERROR: Unsupported attribute of "each"
  }
}
