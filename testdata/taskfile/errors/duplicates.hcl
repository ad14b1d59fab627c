task "dups" {
  variable "site" {}
  variable "site" {}  # ERROR: Duplicate variable
  step "a" {
    plugin = "../plugins/dummy.wasm"
  }
  step "a" {  # ERROR: Duplicate step
    plugin = "../plugins/dummy.wasm"
  }
  step "b" {
    plugin = "../plugins/dummy.wasm"
    retry { attempts = 2 }
    retry { attempts = 3 }  # ERROR: Duplicate retry block
  }
}
task "second" {  # ERROR: Duplicate task block
  step "a" {
    plugin = "../plugins/dummy.wasm"
  }
}
