package taskfile

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseCapabilities(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		src   string
		opts  Options
		check func(t *testing.T, s *Step)
	}{
		{
			name: "nothing granted by default",
			src: `
task "t" {
  step "a" { plugin = "p.wasm" }
}`,
			check: func(t *testing.T, s *Step) {
				require.Nil(t, s.HTTP)
				require.Nil(t, s.Effects)
				require.Equal(t, WorkspaceRW, s.Workspace)
				require.Empty(t, s.Mounts)
				require.Zero(t, s.HostCalls)
			},
		},
		{
			name: "http defaults",
			src: `
task "t" {
  step "a" {
    plugin = "p.wasm"
    http { allow = ["Docs.Example.org", "127.0.0.1:*", "[::1]:8080", "example.org:0443"] }
  }
}`,
			check: func(t *testing.T, s *Step) {
				require.Equal(t, []string{"docs.example.org", "127.0.0.1:*", "[::1]:8080", "example.org:443"}, s.HTTP.Allow)
				require.Equal(t, int64(DefaultHTTPMaxBytes), s.HTTP.MaxBytes)
				require.Equal(t, int64(4<<20), s.HTTP.MaxBytes)
				require.Equal(t, DefaultHTTPTimeout, s.HTTP.Timeout)
				require.Equal(t, 30*time.Second, s.HTTP.Timeout)
				require.Equal(t, 5, s.HTTP.DeclRange.Start.Line)
			},
		},
		{
			name: "http with everything",
			src: `
task "t" {
  step "a" {
    plugin = "p.wasm"
    http {
      allow     = concat(["127.0.0.1:8080"], ["docs.example.org"])
      max_bytes = 1024
      timeout   = "10s"
    }
  }
}`,
			check: func(t *testing.T, s *Step) {
				require.Equal(t, &HTTPGrant{
					Allow:     []string{"127.0.0.1:8080", "docs.example.org"},
					MaxBytes:  1024,
					Timeout:   10 * time.Second,
					DeclRange: s.HTTP.DeclRange,
				}, s.HTTP)
			},
		},
		{
			name: "effect defaults",
			src: `
task "t" {
  step "a" {
    plugin = "p.wasm"
    effect "http" { hosts = ["127.0.0.1:*"] }
    effect "file" {}
  }
}`,
			check: func(t *testing.T, s *Step) {
				require.Len(t, s.Effects, 2)
				h, f := s.Effects[EffectHTTP], s.Effects[EffectFile]
				require.Equal(t, &EffectGrant{Kind: "http", Hosts: []string{"127.0.0.1:*"}, Mode: DefaultEffectMode, DeclRange: h.DeclRange}, h)
				require.Equal(t, &EffectGrant{Kind: "file", Mode: "resend", DeclRange: f.DeclRange}, f)
				require.Equal(t, 6, f.DeclRange.Start.Line)
			},
		},
		{
			name: "effect modes",
			src: `
task "t" {
  step "a" {
    plugin = "p.wasm"
    effect "http" {
      hosts     = ["127.0.0.1:8080"]
      mode      = "check"
      check_url = "https://127.0.0.1:8080/applied"
    }
    effect "file" {
      mode = "manual"
    }
  }
}`,
			check: func(t *testing.T, s *Step) {
				require.Equal(t, EffectModeCheck, s.Effects["http"].Mode)
				require.Equal(t, "https://127.0.0.1:8080/applied", s.Effects["http"].CheckURL)
				require.Equal(t, EffectModeManual, s.Effects["file"].Mode)
				require.Empty(t, s.Effects["file"].CheckURL)
			},
		},
		{
			name: "workspace, host calls and mounts",
			src: `
task "t" {
  step "a" {
    plugin     = "p.wasm"
    workspace  = "none"
    host_calls = 10000
    mount "data" { source = "./data" }
    mount "abs" { source = "/srv/../data" }
  }
}`,
			check: func(t *testing.T, s *Step) {
				require.Equal(t, WorkspaceNone, s.Workspace)
				require.Equal(t, 10000, s.HostCalls)
				require.Len(t, s.Mounts, 2)
				require.Equal(t, "data", s.Mounts[0].Name)
				require.Equal(t, "./data", s.Mounts[0].Source)
				require.Equal(t, filepath.Join("tasks", "data"), s.Mounts[0].SourcePath)
				require.Equal(t, 7, s.Mounts[0].DeclRange.Start.Line)
				require.Equal(t, "/data", s.Mounts[1].SourcePath)
			},
		},
		{
			name: "workspace ro and zero host calls",
			src: `
task "t" {
  step "a" {
    plugin     = "p.wasm"
    workspace  = "ro"
    host_calls = 0
  }
}`,
			check: func(t *testing.T, s *Step) {
				require.Equal(t, WorkspaceRO, s.Workspace)
				require.Zero(t, s.HostCalls)
			},
		},
		{
			name: "mount sources are relative to the base dir",
			src: `
task "t" {
  step "a" {
    plugin = "p.wasm"
    mount "data" { source = "data" }
  }
}`,
			opts: Options{BaseDir: "/srv/tasks"},
			check: func(t *testing.T, s *Step) {
				require.Equal(t, "/srv/tasks/data", s.Mounts[0].SourcePath)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task, diags := Parse("tasks/t.hcl", []byte(tt.src), tt.opts)
			require.False(t, diags.HasErrors(), diags.Error())
			tt.check(t, task.Steps[0])
		})
	}
}

func TestParseFileCapabilities(t *testing.T) {
	t.Parallel()
	path := filepath.Join(testdata, "valid", "capabilities.hcl")
	task, diags := ParseFile(path, Options{CheckPlugins: true})
	require.Empty(t, diags, diags.Error())

	notify, sealed := task.Steps[0], task.Steps[1]
	require.Equal(t, []string{"127.0.0.1:8080", "docs.example.org", "[::1]:*"}, notify.HTTP.Allow)
	require.Equal(t, int64(1<<20), notify.HTTP.MaxBytes)
	require.Equal(t, 10*time.Second, notify.HTTP.Timeout)
	require.Equal(t, []string{"127.0.0.1:*"}, notify.Effects["http"].Hosts)
	require.Equal(t, "check", notify.Effects["http"].Mode)
	require.Equal(t, "http://127.0.0.1:8080/applied", notify.Effects["http"].CheckURL)
	require.Equal(t, "resend", notify.Effects["file"].Mode)
	require.Equal(t, "ro", notify.Workspace)
	require.Len(t, notify.Mounts, 1)
	require.Equal(t, filepath.Join(testdata, "valid", "data"), notify.Mounts[0].SourcePath)
	require.Equal(t, 10000, notify.HostCalls)

	require.Nil(t, sealed.HTTP)
	require.Nil(t, sealed.Effects)
	require.Equal(t, "none", sealed.Workspace)
}

func TestMountSourceCheckedOnlyWithOption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.wasm"), []byte("\x00asm"), 0o644))
	src := func(source string) []byte {
		return []byte(`task "t" {
  step "a" {
    plugin = "p.wasm"
    mount "m" { source = "` + source + `" }
  }
}`)
	}
	file := filepath.Join(dir, "t.hcl")

	_, diags := Parse(file, src("missing"), Options{})
	require.False(t, diags.HasErrors(), diags.Error())

	task, diags := Parse(file, src("data"), Options{CheckPlugins: true})
	require.False(t, diags.HasErrors(), diags.Error())
	require.Equal(t, filepath.Join(dir, "data"), task.Steps[0].Mounts[0].SourcePath)

	for source, summary := range map[string]string{
		"missing":                     "Mount source not found",
		"p.wasm":                      "Mount source is not a directory",
		filepath.Join(dir, "nothere"): "Mount source not found",
	} {
		_, diags = Parse(file, src(source), Options{CheckPlugins: true})
		require.Len(t, diags, 1, source)
		require.Equal(t, summary, diags[0].Summary, source)
		require.Equal(t, 4, diags[0].Subject.Start.Line)
		require.Equal(t, 26, diags[0].Subject.Start.Column, "the source value")
	}
}

func TestHostAllowed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		patterns []string
		hostport string
		want     bool
	}{
		// A pattern without a port matches 80 and 443 only.
		{[]string{"example.org"}, "example.org:443", true},
		{[]string{"example.org"}, "example.org:80", true},
		{[]string{"example.org"}, "example.org:8080", false},
		{[]string{"example.org"}, "www.example.org:443", false},
		{[]string{"example.org"}, "example.org.evil.com:443", false},
		// An explicit port matches only itself.
		{[]string{"127.0.0.1:8080"}, "127.0.0.1:8080", true},
		{[]string{"127.0.0.1:8080"}, "127.0.0.1:8081", false},
		{[]string{"127.0.0.1:8080"}, "127.0.0.1:80", false},
		{[]string{"127.0.0.1:8080"}, "127.0.0.2:8080", false},
		{[]string{"example.org:0443"}, "example.org:443", true},
		// "*" matches any port.
		{[]string{"127.0.0.1:*"}, "127.0.0.1:1", true},
		{[]string{"127.0.0.1:*"}, "127.0.0.1:65535", true},
		{[]string{"127.0.0.1:*"}, "localhost:8080", false},
		// Host names compare case-insensitively, addresses by value.
		{[]string{"Docs.Example.ORG"}, "docs.example.org:443", true},
		{[]string{"docs.example.org"}, "DOCS.example.org:80", true},
		{[]string{"[::1]:*"}, "[::1]:9000", true},
		{[]string{"[0:0:0:0:0:0:0:1]:9000"}, "[::1]:9000", true},
		{[]string{"[::1]"}, "[::1]:443", true},
		{[]string{"[::1]"}, "[::1]:444", false},
		{[]string{"[::1]:*"}, "[::2]:9000", false},
		// Any pattern may match.
		{[]string{"a.example", "b.example:8080"}, "b.example:8080", true},
		{[]string{"a.example", "b.example:8080"}, "c.example:8080", false},
		// Invalid patterns match nothing.
		{[]string{"*"}, "example.org:443", false},
		{[]string{"*:*"}, "example.org:443", false},
		{[]string{"*.example.org"}, "www.example.org:443", false},
		{[]string{"https://example.org"}, "example.org:443", false},
		{[]string{"example.org/"}, "example.org:443", false},
		{[]string{""}, "example.org:443", false},
		{nil, "example.org:443", false},
		// The port must be present and valid.
		{[]string{"example.org"}, "example.org", false},
		{[]string{"example.org:*"}, "example.org:", false},
		{[]string{"example.org:*"}, "example.org:0", false},
		{[]string{"example.org:*"}, "example.org:65536", false},
		{[]string{"example.org:*"}, "example.org:+80", false},
		{[]string{"example.org:*"}, "example.org:http", false},
		{[]string{"example.org:*"}, ":80", false},
		{[]string{"example.org:*"}, "", false},
		{[]string{"::1"}, "[::1]:443", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, HostAllowed(tt.patterns, tt.hostport), "HostAllowed(%q, %q)", tt.patterns, tt.hostport)
	}
}

func TestParseHostPattern(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"example.org":      "example.org",
		"EXAMPLE.org:8080": "example.org:8080",
		"localhost:*":      "localhost:*",
		"127.0.0.1":        "127.0.0.1",
		"[::1]":            "[::1]",
		"[FE80::1]:443":    "[fe80::1]:443",
		"a-b.c0:00080":     "a-b.c0:80",
		"xn--bcher-kva.ch": "xn--bcher-kva.ch",
	} {
		host, port, err := parseHostPattern(in)
		require.NoError(t, err, in)
		require.Equal(t, want, formatHostPattern(host, port), in)
	}
	for _, in := range []string{
		"", "*", "*:80", "*.example.org", "http://example.org", "example.org/x", "example.org?x",
		"user@example.org", "example .org", "exämple.org", "example.org:", "example.org:0",
		"example.org:65536", "example.org:-1", "example.org:+1", "example.org:1_0", "example.org:**",
		"::1", "[::1", "[::1]x", "[127.0.0.1]", "[::1]:", "-a.example", "a-.example", "a..example",
		".example", "example.", "a_b.example",
	} {
		_, _, err := parseHostPattern(in)
		require.Error(t, err, "%q", in)
	}
}

func TestCheckURLProblem(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"http://127.0.0.1:8080/applied", "https://example.org", "HTTP://example.org/a/b", "http://[::1]:80/x"} {
		require.Empty(t, checkURLProblem(ok), ok)
	}
	for _, bad := range []string{"", "127.0.0.1:8080/applied", "ftp://example.org", "http:///x", "http://:80/x", "http:example.org",
		"http://u:p@example.org/", "http://example.org/?", "http://example.org/?a=1", "http://example.org/#", "http://example.org/#f", "http://exa mple.org/"} {
		require.NotEmpty(t, checkURLProblem(bad), bad)
	}
}
