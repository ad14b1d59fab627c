policy "periodic-summary" {
  version    = 1
  assumption = "A model resumed in a fresh context after many units loses track of what earlier stages produced unless a short summary of each is recorded where the handoff shows it."

  evidence {
    text = "None yet: no eval backs this policy. It is kept as the cheapest way to make each stage's result visible in the progress record; an ablation should show whether resumed runs need it."
  }

  # After every step of the task: one summary unit per step.
  insert "summary" {
    after     = "*"
    plugin    = "../plugins/examples/summary/summary.wasm"
    input     = { output = step.anchor.output }
    timeout   = "10s"
    workspace = "none"
  }

  steps  = "periodic-summary.*"
  params = { max_chars = 200 }
}

policy "periodic-summary" {
  version    = 2
  assumption = "A model resumed in a fresh context in the middle of a long fan-out loses track of what the units before it produced unless a short summary of every few dozen is recorded where the handoff shows it, while the fan-out still runs."

  evidence {
    text = "None yet: no eval backs this policy. Version 2 summarises every 50 committed units of each step as they commit, instead of each step once it has finished, so a handoff in the middle of a long step has something to show; an ablation should show whether resumed runs need it."
  }

  # Beside every step: a summary unit for each 50 of its units that commit,
  # while the step runs, and one for the rest when it completes.
  insert "summary" {
    after     = "*"
    every     = 50
    plugin    = "../plugins/examples/summary/summary.wasm"
    input     = { output = step.anchor.output, window = each.value }
    timeout   = "10s"
    workspace = "none"
  }

  steps  = "periodic-summary.*"
  params = { max_chars = 200 }
}
