package taskfile

import (
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// Model providers (Model.Provider): the wire protocol the engine speaks to
// the model's endpoint.
const (
	// ProviderOpenAI is the chat-completions protocol (POST
	// <base_url>/chat/completions) that OpenAI, vLLM, llama.cpp's server and
	// Ollama speak.
	ProviderOpenAI = "openai"
	// ProviderAnthropic is Anthropic's Messages API (POST
	// <base_url>/v1/messages).
	ProviderAnthropic = "anthropic"
)

// Defaults of a model block.
const (
	DefaultModelTimeout   = 60 * time.Second
	DefaultModelMaxTokens = 4096
)

// DefaultBaseURL is the endpoint of a provider when a model block names
// none.
var DefaultBaseURL = map[string]string{
	ProviderOpenAI:    "https://api.openai.com/v1",
	ProviderAnthropic: "https://api.anthropic.com",
}

var modelProviders = []string{ProviderOpenAI, ProviderAnthropic}

// Model is a model a task declares with a model "NAME" block. Steps are
// granted models by name (Step.Models). The block names the environment
// variable that holds the API key, never the key: the worker reads it when
// a call is made, so it enters no record.
type Model struct {
	Name        string
	Provider    string        // ProviderOpenAI or ProviderAnthropic
	BaseURL     string        // http(s) URL without query or fragment
	ID          string        // the provider's model id (the model attribute)
	APIKeyEnv   string        // "" when the endpoint needs no key
	InputPrice  float64       // cost units per million input tokens
	OutputPrice float64       // cost units per million output tokens
	Timeout     time.Duration // per request to the provider
	MaxTokens   int           // cap on the output tokens of one call
	DeclRange   hcl.Range     // the model block's header
}

// Cost is the cost, in the task's cost units, of a call that used in input
// and out output tokens.
func (m *Model) Cost(in, out int64) float64 {
	return (float64(in)*m.InputPrice + float64(out)*m.OutputPrice) / 1e6
}

var modelSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "provider", Required: true},
		{Name: "base_url"},
		{Name: "model", Required: true},
		{Name: "api_key_env"},
		{Name: "api_key"}, // refused with its own diagnostic
		{Name: "input_price"},
		{Name: "output_price"},
		{Name: "timeout"},
		{Name: "max_tokens"},
	},
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// decodeModelBlock decodes a model block, applying defaults for what it
// leaves out.
func decodeModelBlock(block *hcl.Block) (*Model, hcl.Diagnostics) {
	m := &Model{Name: block.Labels[0], Timeout: DefaultModelTimeout, MaxTokens: DefaultModelMaxTokens, DeclRange: block.DefRange}
	var diags hcl.Diagnostics
	if !hclsyntax.ValidIdentifier(m.Name) {
		diags = append(diags, hcldecode.InvalidName("model", block))
	}
	content, moreDiags := block.Body.Content(modelSchema)
	diags = append(diags, moreDiags...)
	attrs := content.Attributes

	diags = append(diags, hcldecode.Fields(attrs,
		hcldecode.Set("provider", &m.Provider, hcldecode.OneOf("Unknown model provider",
			`provider must be "openai" (the chat-completions protocol of OpenAI, vLLM, llama.cpp and Ollama) or "anthropic" (the Messages API)`, modelProviders...)),
		hcldecode.Set("base_url", &m.BaseURL, urlCheck("Invalid base URL",
			`base_url must be an http or https URL without query or fragment, such as "http://127.0.0.1:11434/v1"`, baseURLProblem)),
		hcldecode.Set("model", &m.ID, hcldecode.NotEmpty("Empty model id", `model must name the provider's model, such as "gpt-4o-mini" or "claude-sonnet-4-5".`)),
		hcldecode.Set("api_key_env", &m.APIKeyEnv, hcldecode.Check(hcldecode.String, "Invalid environment variable name", func(name string) string {
			if envName.MatchString(name) {
				return ""
			}
			// Not echoed: a key pasted here must not reach a log.
			return `api_key_env names the environment variable holding the API key (letters, digits and underscores, not starting with a digit), such as "OPENAI_API_KEY"; it is not the key itself.`
		})),
		hcldecode.Set("timeout", &m.Timeout, hcldecode.Positive("timeout must be positive; got %q.")),
		hcldecode.Set("max_tokens", &m.MaxTokens, hcldecode.AtLeast(1, "Invalid token cap",
			"max_tokens caps the output tokens of one call; it must be at least 1; got %d.")),
	)...)
	if _, ok := attrs["base_url"]; !ok {
		m.BaseURL = DefaultBaseURL[m.Provider]
	}
	if attr, ok := attrs["api_key"]; ok {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "API key in the task file",
			Detail:   "A task file never holds an API key: it would be stored with the task. Name the environment variable that holds it instead, as in api_key_env = \"OPENAI_API_KEY\"; the worker reads it when a call is made.",
			Subject:  attr.NameRange.Ptr(),
			Context:  attr.Range.Ptr(),
		})
	}
	price := func(name string, dst *float64) hcldecode.Field {
		return hcldecode.Set(name, dst, hcldecode.Float("Invalid price",
			name+" is the cost, in the task's cost units, of a million tokens; it must be a finite number of 0 or more; got %s.",
			func(f float64) bool { return f >= 0 }))
	}
	diags = append(diags, hcldecode.Fields(attrs, price("input_price", &m.InputPrice), price("output_price", &m.OutputPrice))...)
	return m, diags
}

// baseURLProblem says what is wrong with u as a base_url, or "".
func baseURLProblem(u string) string {
	if parsed, err := url.Parse(u); err == nil && (parsed.RawQuery != "" || parsed.ForceQuery) {
		return fmt.Sprintf("%q has a query", u)
	}
	return checkURLProblem(u)
}

// decodeModelGrant decodes a step's models attribute: the names of the
// task's models it may call. They are resolved by resolveModels once every
// model block is known.
func decodeModelGrant(s *Step, attrs hcl.Attributes) hcl.Diagnostics {
	attr, ok := attrs["models"]
	if !ok {
		return nil
	}
	names, diags := hcldecode.StringList(attr)
	if diags.HasErrors() {
		return diags
	}
	s.modelNames, s.modelsAttr = names, attr
	return diags
}

// resolveModels gives each step the models its models attribute names,
// reporting a name the task does not declare (on the element when the list
// is written out) and a name listed twice.
func resolveModels(task *Task) hcl.Diagnostics {
	var diags hcl.Diagnostics
	byName := map[string]*Model{}
	var names []string
	for _, m := range task.Models {
		byName[m.Name] = m
		names = append(names, m.Name)
	}
	for _, s := range task.Steps {
		if s.modelsAttr == nil {
			continue
		}
		elems := hcldecode.ElementRanges(s.modelsAttr, len(s.modelNames))
		at := func(i int) (*hcl.Range, *hcl.Range) {
			if elems != nil {
				return elems[i].Ptr(), s.modelsAttr.Range.Ptr()
			}
			return s.modelsAttr.Expr.Range().Ptr(), s.modelsAttr.Range.Ptr()
		}
		s.Models = map[string]*Model{}
		for i, name := range s.modelNames {
			subject, context := at(i)
			m, ok := byName[name]
			switch {
			case !ok:
				detail := fmt.Sprintf("models names %q, but this task declares no model block of that name.%s", name, hcldecode.DidYouMean(name, names))
				if len(names) == 0 {
					detail = fmt.Sprintf("models names %q, but this task declares no models; declare one at task level: model %q { provider = \"openai\", model = \"...\" }.", name, name)
				}
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Reference to undeclared model", Detail: detail, Subject: subject, Context: context})
			case s.Models[name] != nil:
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate model grant",
					Detail: fmt.Sprintf("models lists %q more than once.", name), Subject: subject, Context: context})
			default:
				s.Models[name] = m
			}
		}
	}
	return diags
}
