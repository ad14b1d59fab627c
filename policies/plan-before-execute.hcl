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

policy "plan-before-execute" {
  version    = 2
  assumption = "As version 1; a plan that leaves out what the task is for and what it must never do is a plan for the wrong task, so the planner is handed the task's objective and constraints verbatim."

  evidence {
    text = "None yet: no eval backs this policy. Version 1's plans named only the next step: its planner was never given the objective or the constraints (policy expressions could not read them). The planner step records its plan as a progress decision, so the handoff shows it whether or not it helped."
  }

  insert "plan" {
    before    = "draft*"
    plugin    = "../plugins/examples/planner/planner.wasm"
    input     = { task = task.name, objective = task.objective, constraints = task.constraints }
    timeout   = "10s"
    workspace = "none"
  }
}
