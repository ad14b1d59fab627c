task "models" {
  model "fast" {
    provider    = "opnai"  # ERROR: Unknown model provider
    model       = "gpt-4o-mini"
    api_key_env = "sk-live-123"  # ERROR: Invalid environment variable name
  }
  model "local" {
    provider     = "openai"
    base_url     = "localhost:11434/v1"  # ERROR: Invalid base URL
    model        = ""  # ERROR: Empty model id
    input_price  = -1  # ERROR: Invalid price
    output_price = "cheap"  # ERROR: Incorrect attribute value type
    timeout      = "0s"  # ERROR: Invalid duration
    max_tokens   = 0  # ERROR: Invalid token cap
  }
  model "claude" {  # ERROR: Missing required argument
    provider = "anthropic"
    api_key  = "sk-ant-secret"  # ERROR: API key in the task file
  }
  model "local" {  # ERROR: Duplicate model
    provider = "openai"
    model    = "llama3"
  }
  step "a" {
    plugin = "../plugins/dummy.wasm"
    models = ["fast", "lokal"]  # ERROR: Reference to undeclared model
  }
  step "b" {
    plugin = "../plugins/dummy.wasm"
    models = ["fast", "fast"]  # ERROR: Duplicate model grant
  }
}
