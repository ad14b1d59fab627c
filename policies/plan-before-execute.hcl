policy "plan-before-execute" {
  version    = 1
  assumption = "A model asked to act at once starts on the first thing it sees; writing a plan first (objective, constraints, the step about to run) makes it keep to them."

  evidence {
    text = "None yet: no eval backs this policy. The planner step records its plan as a progress decision, so the handoff shows it whether or not it helped."
  }

  # Before each step named draft*.
  insert "plan" {
    before    = "draft*"
    plugin    = "../plugins/examples/planner/planner.wasm"
    input     = { task = task.name }
    timeout   = "10s"
    workspace = "none"
  }
}
