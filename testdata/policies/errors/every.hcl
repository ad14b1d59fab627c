policy "every" {
  version    = 1
  assumption = "x"
  evidence {
    text = "y"
  }
  insert "zero" {
    after  = "fetch"
    every  = 0 # ERROR: Invalid insert interval
    plugin = "p.wasm"
  }
  insert "huge" {
    after  = "fetch"
    every  = 1001 # ERROR: Invalid insert interval
    plugin = "p.wasm"
  }
  insert "early" {
    before = "fetch"
    every  = 5 # ERROR: Invalid insert interval
    plugin = "p.wasm"
  }
  insert "items" {
    after    = "fetch"
    every    = 5
    plugin   = "p.wasm"
    for_each = [1, 2] # ERROR: Invalid insert interval
  }
  insert "text" {
    after  = "fetch"
    every  = "often" # ERROR: Incorrect attribute value type
    plugin = "p.wasm"
  }
}
