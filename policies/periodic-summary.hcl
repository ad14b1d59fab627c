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
