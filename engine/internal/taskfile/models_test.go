package taskfile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseModels(t *testing.T) {
	t.Parallel()
	src := `
task "agent" {
  model "fast" {
    provider     = "openai"
    base_url     = "http://127.0.0.1:8080/v1"
    model        = "gpt-4o-mini"
    api_key_env  = "OPENAI_API_KEY"
    input_price  = 0.15
    output_price = 0.6
    timeout      = "20s"
    max_tokens   = 512
  }
  model "claude" {
    provider = "anthropic"
    model    = "claude-sonnet-4-5"
  }
  step "plan" {
    plugin = "p.wasm"
    models = ["fast", "claude"]
  }
  step "write" { plugin = "p.wasm" }
}`
	task, diags := Parse("agent.hcl", []byte(src), Options{})
	require.False(t, diags.HasErrors(), diags.Error())
	require.Len(t, task.Models, 2)
	fast := task.Models[0]
	require.Equal(t, &Model{
		Name: "fast", Provider: ProviderOpenAI, BaseURL: "http://127.0.0.1:8080/v1", ID: "gpt-4o-mini",
		APIKeyEnv: "OPENAI_API_KEY", InputPrice: 0.15, OutputPrice: 0.6, Timeout: 20 * time.Second, MaxTokens: 512,
		DeclRange: fast.DeclRange,
	}, fast)
	claude := task.Models[1]
	require.Equal(t, "https://api.anthropic.com", claude.BaseURL, "the provider's endpoint by default")
	require.Equal(t, DefaultModelTimeout, claude.Timeout)
	require.Equal(t, DefaultModelMaxTokens, claude.MaxTokens)
	require.Empty(t, claude.APIKeyEnv)
	require.Zero(t, claude.InputPrice)

	require.Equal(t, map[string]*Model{"fast": fast, "claude": claude}, task.Steps[0].Models)
	require.Nil(t, task.Steps[1].Models, "a step without models may call none")
	require.InDelta(t, 0.15*1000/1e6+0.6*200/1e6, fast.Cost(1000, 200), 1e-12)
}
