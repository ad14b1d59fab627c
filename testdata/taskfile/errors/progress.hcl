task "progress" {
  progress {
    unit   = ""             # ERROR: Empty progress unit
    step   = "chek"         # ERROR: Reference to undeclared step
    labels = ["a", "b"]     # ERROR: Incorrect attribute value type
    units  = "pages"        # ERROR: Unsupported argument
  }
  progress {  # ERROR: Duplicate progress block
    unit = "pages"
  }
  step "check" {
    plugin   = "../plugins/dummy.wasm"
    for_each = ["a", "b"]
  }
}
