# Every mistake of this file is reported at once, each on its line.
policy "bad name!" { # ERROR: Invalid policy name
  version    = 1
  assumption = "x"
  evidence {
    text = "y"
  }
}

policy "no-version" { # ERROR: Missing required argument | Missing evidence block
  assumption = "x"
}

policy "zero" {
  version    = 0 # ERROR: Invalid policy version
  assumption = "  " # ERROR: Empty text
  colour     = "blue" # ERROR: Unsupported argument
  evidence {
    text   = "" # ERROR: Empty text
    result = 3
  }
  evidence { # ERROR: Duplicate evidence block
    text = "again"
  }
}

policy "dup" {
  version    = 1
  assumption = "x"
  evidence {
    text = "y"
  }
}

policy "dup" { # ERROR: Duplicate policy version
  version    = 1
  assumption = "x"
  evidence {
    text = "y"
  }
}
