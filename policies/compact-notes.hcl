policy "compact-notes" {
  version    = 1
  assumption = "A fresh context handed thousands of near-identical findings spends its window on them; a summary that keeps their number and their most common shapes carries the same information, while decisions and blockers, which a summary must never lose, are kept whole by the engine."

  evidence {
    text = "None yet: no eval backs this policy. engine TestCompactNotesPolicy shows it keeps the open notes of a 300-unit fan-out under its bound with every decision intact; whether resumed runs do better with it needs an ablation."
  }

  # Beside every step: a compactor unit for each 100 of its units that
  # commit, while the step runs, and one when it completes.
  insert "compact" {
    after     = "*"
    every     = 100
    plugin    = "../plugins/examples/compactor/compactor.wasm"
    timeout   = "30s"
    workspace = "none"
  }

  steps  = "compact-notes.*"
  params = { keep_under = 50 }
}
