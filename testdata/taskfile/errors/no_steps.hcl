task "empty" {  # ERROR: Task has no steps
  objective = "nothing to do"
}
