# A tool-using agent: the model asks for lookups, the plugin runs them
# through host capabilities and feeds the results back until the model
# answers. See README.md for running it against recorded responses (make
# agent-demo) or a real endpoint.
task "agent" {
  objective = "answer a question with a tool-using model loop"

  # The defaults are make agent-demo's conversation; the eval set
  # testdata/evals/agent.hcl asks other questions.
  variable "question" {
    type    = string
    default = "What is the capital of Norway, and what river runs through it?"
  }
  variable "facts" {
    type = map(string)
    default = {
      Norway = "Norway's capital is Oslo; the Akerselva river runs through it."
      Sweden = "Sweden's capital is Stockholm."
    }
  }
  variable "max_turns" {
    type    = number
    default = 4
  }

  model "assistant" {
    provider     = "openai"
    base_url     = "http://127.0.0.1:11434/v1" # Ollama's OpenAI-compatible endpoint
    model        = "llama3.1:8b"
    api_key_env  = "AGENT_API_KEY"
    input_price  = 0.15 # cost units per million tokens
    output_price = 0.6
    max_tokens   = 512
  }

  # The system prompt: read from the file when the task is submitted and
  # pinned, text and sha256, in the run manifest (lhengine manifest ID).
  prompt "system" {
    file    = "prompts/system.md"
    version = "1"
  }

  step "answer" {
    plugin = "agent.wasm"
    models = ["assistant"]
    input = {
      model     = "assistant"
      system    = prompt.system
      question  = var.question
      max_turns = var.max_turns
      facts     = var.facts
    }
    retry {
      attempts = 3
    }
  }
}
