task "prompts" {
  prompt "system" {
    file    = "../prompts/missing.md"  # ERROR: Prompt file not found
    version = "v1"
  }
  prompt "both" {
    file = "x.md"
    text = "inline"  # ERROR: Prompt has both file and text
  }
  prompt "none" {  # ERROR: Prompt has no text
    version = "v2"
  }
  prompt "system" {  # ERROR: Duplicate prompt
    text = "again"
  }
  prompt "empty" {
    file = ""  # ERROR: Invalid prompt file
  }
  prompt "count" {
    text = 3
    version = ["v1"]  # ERROR: Incorrect attribute value type
  }
  step "a" {
    plugin = "../plugins/dummy.wasm"
    input  = { system = prompt.sytem }  # ERROR: Reference to undeclared prompt
  }
  step "b" {
    plugin = "../plugins/dummy.wasm"
    input  = { system = prompt }  # ERROR: Invalid reference
  }
  step "c" {
    plugin = "../plugins/dummy.wasm"
    input  = { n = prompt.count.lines }  # ERROR: Unsupported attribute
  }
}
