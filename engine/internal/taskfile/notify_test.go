package taskfile

import (
	"net/url"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/stretchr/testify/require"
)

func TestNotifyBlock(t *testing.T) {
	t.Parallel()
	src := `task "migrate" {
  notify {
    url    = "http://127.0.0.1:8025/hook"
    events = ["waiting_approval", "paused", "succeeded", "failed"]
  }
  step "a" {
    plugin = "a.wasm"
  }
}
`
	task, diags := Parse("t.hcl", []byte(src), Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.NotNil(t, task.Notify)
	require.Equal(t, "http://127.0.0.1:8025/hook", task.Notify.URL)
	require.Equal(t, []string{"waiting_approval", "paused", "succeeded", "failed"}, task.Notify.Events)
	require.Equal(t, 2, task.Notify.DeclRange.Start.Line)

	for _, u := range []string{"https://hooks.example.org/lhengine?team=ops", "http://[::1]:8025/", "http://localhost"} {
		src := "task \"t\" {\n  notify {\n    url = \"" + u + "\"\n    events = [\"failed\"]\n  }\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"
		task, diags := Parse("t.hcl", []byte(src), Options{})
		require.False(t, diags.HasErrors(), "%s: %v", u, diags)
		require.Equal(t, u, task.Notify.URL)
	}

	task, diags = Parse("t.hcl", []byte("task \"t\" {\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"), Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Nil(t, task.Notify, "no notify block: no notification")
}

// TestNotifyBlockDiagnostics: every mistake is reported at its place, with
// a suggestion for a misspelt name.
func TestNotifyBlockDiagnostics(t *testing.T) {
	t.Parallel()
	const okURL = `url = "http://127.0.0.1:8025/hook"`
	const okEvents = `events = ["succeeded"]`
	cases := []struct {
		name, body, want string
		line, col        int
	}{
		{"unknown attribute", okURL + "\n    event = [\"failed\"]", `Did you mean "events"?`, 4, 5},
		{"unknown event", okURL + "\n    events = [\"succeeded\", \"faild\"]", `"faild" is not an event a notify block can name. Did you mean "failed"?`, 4, 28},
		{"per-unit event", okURL + "\n    events = [\"unit_done\"]", `"unit_done" is not an event`, 4, 15},
		{"duplicate event", okURL + "\n    events = [\"failed\", \"failed\"]", `"failed" is listed twice`, 4, 25},
		{"empty events", okURL + "\n    events = []", "Empty event list", 4, 14},
		{"events not a list", okURL + "\n    events = \"failed\"", "list of string required", 4, 14},
		{"missing events", okURL, `The argument "events" is required`, 2, 10},
		{"missing url", okEvents, `The argument "url" is required`, 2, 10},
		{"scheme", `url = "ftp://127.0.0.1/hook"` + "\n    " + okEvents, `has the scheme "ftp"`, 3, 11},
		{"no scheme", `url = "127.0.0.1:8025/hook"` + "\n    " + okEvents, "Invalid notify URL", 3, 11},
		{"no host", `url = "http:///hook"` + "\n    " + okEvents, `has no host`, 3, 11},
		{"user information", `url = "http://me:secret@127.0.0.1:8025/hook"` + "\n    " + okEvents, "user information", 3, 11},
		{"fragment", `url = "http://127.0.0.1:8025/hook#x"` + "\n    " + okEvents, "fragment", 3, 11},
		{"bad host", `url = "http://exa_mple.org/hook"` + "\n    " + okEvents, "host that is not valid", 3, 11},
		{"malformed", `url = "http://127.0.0.1:99999/hook"` + "\n    " + okEvents, "Invalid notify URL", 3, 11},
		{"variable", `url = var.hook` + "\n    " + okEvents, "cannot refer to var", 3, 11},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := "task \"t\" {\n  notify {\n    " + c.body + "\n  }\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"
			_, diags := Parse("t.hcl", []byte(src), Options{})
			require.True(t, diags.HasErrors())
			var found *hcl.Diagnostic
			for _, d := range diags {
				if strings.Contains(d.Summary+": "+d.Detail, c.want) {
					found = d
					break
				}
			}
			require.NotNil(t, found, "no diagnostic says %q: %v", c.want, diags)
			require.NotNil(t, found.Subject)
			require.Equal(t, "t.hcl", found.Subject.Filename)
			require.Equal(t, c.line, found.Subject.Start.Line, "%v", diags)
			require.Equal(t, c.col, found.Subject.Start.Column, "%v", diags)
		})
	}

	src := "task \"t\" {\n  notify {\n    " + okURL + "\n    " + okEvents + "\n  }\n  notify {\n    " + okURL + "\n    " + okEvents + "\n  }\n  step \"a\" {\n    plugin = \"a.wasm\"\n  }\n}\n"
	_, diags := Parse("t.hcl", []byte(src), Options{})
	require.True(t, diags.HasErrors())
	require.Equal(t, "Duplicate notify block", diags[0].Summary)
	require.Equal(t, 6, diags[0].Subject.Start.Line)
	require.Contains(t, diags[0].Detail, "t.hcl:2,")
}

// FuzzNotifyURL: whatever the url, the check answers without panicking,
// and a URL it accepts is http or https with a host and no user
// information.
func FuzzNotifyURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8025/hook", "https://[::1]/x?y=1", "ftp://h/", "http://u@h/", "http://h:0/", "http://%zz/", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		if notifyURLProblem(u) != "" {
			return
		}
		parsed, err := url.Parse(u)
		require.NoError(t, err, u)
		require.Contains(t, []string{"http", "https"}, parsed.Scheme, u)
		require.NotEmpty(t, parsed.Hostname(), u)
		require.Nil(t, parsed.User, u)
	})
}
