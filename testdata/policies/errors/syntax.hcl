policy "broken" {
  version = 1 +  # ERROR: Invalid expression
}
