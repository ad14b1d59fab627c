package policylang

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/require"
)

// grantTask grants its steps a mount of data/, http to 127.0.0.1:* and
// example.org, the http effect to hooks.example.org, the file effect, a
// read-only workspace and model "fast" (declared with "slow", which no
// step is granted).
const grantTask = `
task "t" {
  model "fast" {
    provider = "openai"
    model    = "m"
  }
  model "slow" {
    provider = "openai"
    model    = "m"
  }
  step "fetch" {
    plugin    = "a.wasm"
    workspace = "ro"
    models    = ["fast"]
    mount "data" {
      source = "data"
    }
    http {
      allow = ["127.0.0.1:*", "example.org"]
    }
  }
  step "send" {
    plugin    = "a.wasm"
    workspace = "none"
    effect "http" {
      hosts = ["hooks.example.org:8443"]
    }
    effect "file" {}
  }
}
`

// grantPolicy is a policy whose one insert (after "fetch") has body.
func grantPolicy(body string) string {
	return `
policy "p" {
  version    = 1
  assumption = "a test fixture"
  evidence {
    text = "none"
  }
  insert "x" {
    after     = "fetch"
    plugin    = "../a.wasm"
` + body + `
  }
}
`
}

// TestInsertedStepsGetOnlyWhatTheTaskGrants: each capability of an
// inserted step either is one a step of the task has (listed as by the
// task) or is refused on its place in the policy file, naming the policy,
// the step and the grant, unless the policy is named as granted.
func TestInsertedStepsGetOnlyWhatTheTaskGrants(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		body  string
		grant string // the capability, as listed
		ok    bool
		line  int // of the refusal, in the policy file
	}{
		{"same mount source", `workspace = "none"
    mount "other" { source = "../data" }`, `mount "other" (data)`, true, 0},
		{"mount of /", `workspace = "none"
    mount "root" { source = "/" }`, `mount "root" (/)`, false, 12},
		{"mount of a parent", `workspace = "none"
    mount "up" { source = ".." }`, `mount "up" (.)`, false, 12},
		{"a host the task allows", `workspace = "none"
    http { allow = ["127.0.0.1:8080"] }`, "http.fetch 127.0.0.1:8080", true, 0},
		{"the same host pattern", `workspace = "none"
    http { allow = ["EXAMPLE.org"] }`, "http.fetch example.org", true, 0},
		{"a host the task does not allow", `workspace = "none"
    http { allow = ["evil.example"] }`, "http.fetch evil.example", false, 12},
		{"another port", `workspace = "none"
    http { allow = ["example.org:8080"] }`, "http.fetch example.org:8080", false, 12},
		{"http effect host", `workspace = "none"
    effect "http" { hosts = ["hooks.example.org:8443"] }`, "effect http hooks.example.org:8443", true, 0},
		{"http effect to an http.fetch host", `workspace = "none"
    effect "http" { hosts = ["example.org"] }`, "effect http example.org", false, 12},
		{"file effect", `workspace = "none"
    effect "file" {}`, "effect file", true, 0},
		{"workspace ro", `workspace = "ro"`, "workspace ro", true, 0},
		{"workspace rw", `workspace = "rw"`, "workspace rw", false, 11},
		{"workspace by default", ``, "workspace rw", false, 8},
		{"granted model", `workspace = "none"
    models = ["fast"]`, "model fast", true, 0},
		{"declared model no step has", `workspace = "none"
    models = ["slow"]`, "model slow", false, 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			task := parseTask(t, grantTask)
			p := parsePolicy(t, grantPolicy(c.body))
			out, diags := ApplyPolicies(task, []*Policy{p}, false)
			if c.ok {
				require.False(t, diags.HasErrors(), diags.Error())
			} else {
				require.True(t, diags.HasErrors(), "the task grants no step %s", c.grant)
				require.Len(t, diags.Errs(), 1, diags.Error())
				d := diags.Errs()[0].(*hcl.Diagnostic)
				require.Equal(t, "policies/test.hcl", d.Subject.Filename)
				require.Equal(t, c.line, d.Subject.Start.Line, d.Error())
				for _, want := range []string{"p@1", `"p.x@fetch"`, c.grant, "--grant-policy p"} {
					require.Contains(t, d.Detail, want)
				}

				// Named as granted, it applies, and the grant is listed.
				out, diags = ApplyPolicies(task, []*Policy{p}, false, "p")
				require.False(t, diags.HasErrors(), diags.Error())
			}
			var listed []string
			for _, g := range out.PolicyGrants {
				require.Equal(t, "p@1", g.Policy)
				require.Equal(t, "p.x@fetch", g.Step)
				if g.Capability == c.grant {
					require.Equal(t, c.ok, g.ByTask)
				}
				listed = append(listed, g.Capability)
			}
			require.Contains(t, listed, c.grant)
		})
	}
}

// TestPolicyGrantsOneDiagnosticPerGrant: an insert matching several steps
// is refused once per capability, not once per step it goes next to.
func TestPolicyGrantsOneDiagnosticPerGrant(t *testing.T) {
	t.Parallel()
	task := parseTask(t, threeSteps)
	p := parsePolicy(t, strings.Replace(grantPolicy(`workspace = "none"
    mount "root" { source = "/" }
    http { allow = ["127.0.0.1:*"] }`), `"fetch"`, `"*"`, 1))
	_, diags := ApplyPolicies(task, []*Policy{p}, false)
	require.Len(t, diags.Errs(), 2, diags.Error())
}
