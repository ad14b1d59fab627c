package taskfile

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

const dummySHA256 = "93a44bbb96c751218e4c00d479e4c14358122a389acca16205b1e4d0dc5f9476"

func TestParseFileSiteAudit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(testdata, "valid", "site-audit.hcl")
	task, diags := ParseFile(path, Options{CheckPlugins: true})
	require.False(t, diags.HasErrors(), diags.Error())

	require.Equal(t, "site-audit", task.Name)
	require.Equal(t, "Audit every page", task.Objective)
	require.Equal(t, []string{"never edit pages", "report only"}, task.Constraints)
	require.Equal(t, path, task.Filename)
	require.Equal(t, filepath.Dir(path), task.Dir)
	require.NotEmpty(t, task.Source)
	require.Equal(t, hcl.Pos{Line: 2, Column: 1, Byte: 80}, task.DeclRange.Start)

	require.Len(t, task.Variables, 2)
	site, pages := task.Variables[0], task.Variables[1]
	require.Equal(t, "site", site.Name)
	require.Equal(t, cty.String, site.Type)
	require.Equal(t, "Base URL of the site", site.Description)
	require.True(t, site.Required())
	require.Equal(t, cty.NilVal, site.Default)
	require.Equal(t, 6, site.DeclRange.Start.Line)
	require.Equal(t, cty.List(cty.String), pages.Type)
	require.False(t, pages.Required())
	require.True(t, pages.Default.RawEquals(cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})))

	require.Len(t, task.Steps, 3)
	fetch, check, verify := task.Steps[0], task.Steps[1], task.Steps[2]
	require.Same(t, check, task.Step("check"))
	require.Nil(t, task.Step("nope"))

	require.Equal(t, 0, fetch.Index)
	require.Equal(t, "../plugins/dummy.wasm", fetch.Plugin)
	require.Equal(t, filepath.Join(testdata, "plugins", "dummy.wasm"), fetch.PluginPath)
	require.Equal(t, dummySHA256, fetch.PluginSHA256, "checksum is lower-cased")
	require.Equal(t, 30*time.Second, fetch.Timeout)
	require.Equal(t, uint64(128<<20), fetch.Memory)
	require.Equal(t, Retry{Attempts: 3, Backoff: time.Second, MaxBackoff: 30 * time.Second}, fetch.Retry)
	require.Nil(t, fetch.ForEach)
	require.Equal(t, 1, fetch.Concurrency)
	require.NotNil(t, fetch.Input)
	require.Equal(t, 15, fetch.DeclRange.Start.Line)
	require.Equal(t, "step \"fetch\"", string(task.Source[fetch.DeclRange.Start.Byte:fetch.DeclRange.End.Byte]))
	require.Equal(t, `"../plugins/dummy.wasm"`, string(task.Source[fetch.PluginRange.Start.Byte:fetch.PluginRange.End.Byte]))
	require.Empty(t, fetch.References())

	require.Equal(t, 1, check.Index)
	require.NotNil(t, check.ForEach)
	require.Equal(t, 4, check.Concurrency)
	require.Equal(t, DefaultTimeout, check.Timeout)
	require.Equal(t, uint64(DefaultMemory), check.Memory)
	require.Equal(t, []string{"fetch"}, check.References())

	require.Equal(t, []string{"check"}, verify.References())
	require.NotNil(t, verify.Repair)
	require.Equal(t, "fetch", verify.Repair.RestartFrom)
	require.Equal(t, 0, verify.Repair.RestartIndex)
	require.Equal(t, 2, verify.Repair.Max)
	require.Equal(t, 38, verify.Repair.DeclRange.Start.Line)
}

func TestParseValid(t *testing.T) {
	t.Parallel()

	defaultRetry := Retry{Attempts: 1, Backoff: time.Second, MaxBackoff: time.Minute}
	tests := []struct {
		name  string
		src   string
		opts  Options
		check func(t *testing.T, task *Task)
	}{
		{
			name: "defaults",
			src: `
task "t" {
  step "a" { plugin = "p.wasm" }
}`,
			check: func(t *testing.T, task *Task) {
				require.Empty(t, task.Objective)
				require.Nil(t, task.Constraints)
				require.Empty(t, task.Variables)
				s := task.Steps[0]
				require.Equal(t, DefaultTimeout, s.Timeout)
				require.Equal(t, uint64(64<<20), s.Memory)
				require.Equal(t, defaultRetry, s.Retry)
				require.Equal(t, 1, s.Concurrency)
				require.Nil(t, s.Input)
				require.Nil(t, s.ForEach)
				require.Nil(t, s.Repair)
				require.Empty(t, s.PluginSHA256)
			},
		},
		{
			name: "relative plugin path joins the file's directory",
			src: `
task "t" {
  step "a" { plugin = "plugins/p.wasm" }
}`,
			check: func(t *testing.T, task *Task) {
				require.Equal(t, "tasks", task.Dir)
				require.Equal(t, filepath.Join("tasks", "plugins", "p.wasm"), task.Steps[0].PluginPath)
			},
		},
		{
			name: "absolute plugin path is kept",
			src: `
task "t" {
  step "a" { plugin = "/opt/plugins/../p.wasm" }
}`,
			check: func(t *testing.T, task *Task) {
				require.Equal(t, "/opt/p.wasm", task.Steps[0].PluginPath)
			},
		},
		{
			name: "base dir overrides the file's directory",
			src: `
task "t" {
  step "a" { plugin = "p.wasm" }
}`,
			opts: Options{BaseDir: "/srv/tasks"},
			check: func(t *testing.T, task *Task) {
				require.Equal(t, "/srv/tasks", task.Dir)
				require.Equal(t, "/srv/tasks/p.wasm", task.Steps[0].PluginPath)
			},
		},
		{
			name: "fan-out default concurrency",
			src: `
task "t" {
  step "a" {
    plugin   = "p.wasm"
    for_each = ["x"]
    input    = each.value
  }
}`,
			check: func(t *testing.T, task *Task) {
				require.Equal(t, DefaultConcurrency, task.Steps[0].Concurrency)
			},
		},
		{
			name: "memory units",
			src: `
task "t" {
  step "a" {
    plugin = "p.wasm"
    memory = "512KiB"
  }
  step "b" {
    plugin = "p.wasm"
    memory = "1GiB"
  }
  step "c" {
    plugin = "p.wasm"
    memory = "100MB"
  }
  step "d" {
    plugin = "p.wasm"
    memory = "65536"
  }
  step "e" {
    plugin = "p.wasm"
    memory = 1048576
  }
  step "f" {
    plugin = "p.wasm"
    memory = "4GiB"
  }
  step "g" {
    plugin = "p.wasm"
    memory = "640 KB"
  }
}`,
			check: func(t *testing.T, task *Task) {
				want := []uint64{512 << 10, 1 << 30, 100_000_000, 65536, 1 << 20, 4 << 30, 640_000}
				for i, s := range task.Steps {
					require.Equal(t, want[i], s.Memory, s.Name)
				}
			},
		},
		{
			name: "retry backoff above the default cap raises the cap",
			src: `
task "t" {
  step "a" {
    plugin = "p.wasm"
    retry {
      attempts = 5
      backoff  = "2m"
    }
  }
}`,
			check: func(t *testing.T, task *Task) {
				require.Equal(t, Retry{Attempts: 5, Backoff: 2 * time.Minute, MaxBackoff: 2 * time.Minute}, task.Steps[0].Retry)
			},
		},
		{
			name: "repair of the step itself with default budget",
			src: `
task "t" {
  step "a" { plugin = "p.wasm" }
  step "b" {
    plugin = "p.wasm"
    repair { restart_from = "b" }
  }
}`,
			check: func(t *testing.T, task *Task) {
				r := task.Steps[1].Repair
				require.Equal(t, &Repair{RestartFrom: "b", RestartIndex: 1, Max: DefaultRepairMax, DeclRange: r.DeclRange, restartRange: r.restartRange}, r)
				require.Equal(t, 6, r.DeclRange.Start.Line)
			},
		},
		{
			name: "repair max zero",
			src: `
task "t" {
  step "a" {
    plugin = "p.wasm"
    repair {
      restart_from = "a"
      max          = 0
    }
  }
}`,
			check: func(t *testing.T, task *Task) {
				require.Equal(t, 0, task.Steps[0].Repair.Max)
			},
		},
		{
			name: "untyped variable and null default",
			src: `
task "t" {
  variable "any" {}
  variable "opt" {
    type    = string
    default = null
  }
  step "a" {
    plugin = "p.wasm"
    input  = [var.any, var.opt]
  }
}`,
			check: func(t *testing.T, task *Task) {
				require.Equal(t, cty.DynamicPseudoType, task.Variables[0].Type)
				require.True(t, task.Variables[0].Required())
				require.False(t, task.Variables[1].Required())
				require.True(t, task.Variables[1].Default.RawEquals(cty.NullVal(cty.String)))
			},
		},
		{
			name: "default converted to the declared type",
			src: `
task "t" {
  variable "n" {
    type    = number
    default = "42"
  }
  step "a" { plugin = "p.wasm" }
}`,
			check: func(t *testing.T, task *Task) {
				require.True(t, task.Variables[0].Default.RawEquals(cty.NumberIntVal(42)))
			},
		},
		{
			name: "constant attributes may call functions",
			src: `
task "t" {
  objective = upper("x")
  step "a" {
    plugin  = format("%s.wasm", "p")
    timeout = join("", ["1", "m"])
  }
}`,
			check: func(t *testing.T, task *Task) {
				require.Equal(t, "X", task.Objective)
				require.Equal(t, "p.wasm", task.Steps[0].Plugin)
				require.Equal(t, time.Minute, task.Steps[0].Timeout)
			},
		},
		{
			name: "references, functions and for expressions",
			src: `
task "t" {
  variable "pages" { type = list(string) }
  step "a" {
    plugin = "p.wasm"
    input  = { pages = [for p in var.pages : upper(p)], id = task.id, name = task.name }
  }
  step "b" {
    plugin   = "p.wasm"
    for_each = step.a.output.pages
    input    = { n = each.key + 1, v = each.value, all = length(step.a.output.pages) }
  }
  step "c" {
    plugin = "p.wasm"
    input  = merge(step.a.output, { b = step.b.output })
  }
}`,
			check: func(t *testing.T, task *Task) {
				require.Equal(t, []string{"a"}, task.Steps[1].References())
				require.Equal(t, []string{"a", "b"}, task.Steps[2].References())
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task, diags := Parse("tasks/t.hcl", []byte(tt.src), tt.opts)
			require.False(t, diags.HasErrors(), diags.Error())
			require.NotNil(t, task)
			require.Equal(t, "tasks/t.hcl", task.Filename)
			tt.check(t, task)
		})
	}
}

func TestParseFileMissing(t *testing.T) {
	t.Parallel()
	task, diags := ParseFile(filepath.Join(t.TempDir(), "nope.hcl"), Options{})
	require.Nil(t, task)
	require.True(t, diags.HasErrors())
	require.Equal(t, "Cannot read task file", diags[0].Summary)
}

func TestParseNeverCheckPluginsWithoutOption(t *testing.T) {
	t.Parallel()
	src := []byte(`task "t" {
  step "a" {
    plugin        = "missing.wasm"
    plugin_sha256 = "` + dummySHA256 + `"
  }
}`)
	_, diags := Parse(filepath.Join(t.TempDir(), "t.hcl"), src, Options{})
	require.False(t, diags.HasErrors(), diags.Error())
	_, diags = Parse(filepath.Join(t.TempDir(), "t.hcl"), src, Options{CheckPlugins: true})
	require.True(t, diags.HasErrors())
	require.Equal(t, "Plugin file not found", diags[0].Summary)
}

func TestPluginIsDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := []byte(`task "t" {
  step "a" { plugin = "." }
}`)
	_, diags := Parse(filepath.Join(dir, "t.hcl"), src, Options{CheckPlugins: true})
	require.True(t, diags.HasErrors())
	require.Equal(t, "Plugin is not a file", diags[0].Summary)
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	r := Retry{Attempts: 10, Backoff: time.Second, MaxBackoff: 30 * time.Second}
	for attempt, want := range map[int]time.Duration{
		-1:  time.Second,
		0:   time.Second,
		1:   time.Second,
		2:   2 * time.Second,
		3:   4 * time.Second,
		5:   16 * time.Second,
		6:   30 * time.Second,
		64:  30 * time.Second,
		1e9: 30 * time.Second,
	} {
		require.Equal(t, want, r.Delay(attempt), "attempt %d", attempt)
	}
	require.Equal(t, time.Duration(0), Retry{Backoff: 0, MaxBackoff: time.Minute}.Delay(3))
	// Without a cap the delay grows until it would overflow, then stays.
	uncapped := Retry{Backoff: time.Hour}
	require.Equal(t, 4*time.Hour, uncapped.Delay(3))
	require.Positive(t, uncapped.Delay(200))
}

func TestParseMemory(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint64{
		"0":      0,
		"1B":     1,
		"2KB":    2000,
		"2KiB":   2048,
		"3MiB":   3 << 20,
		"3MB":    3_000_000,
		"1GB":    1_000_000_000,
		" 1GiB ": 1 << 30,
	} {
		got, err := parseMemory(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "MiB", "1.5GiB", "-1", "1TiB", "1 mib", "99999999999999999999", "18446744073709551615GiB"} {
		_, err := parseMemory(in)
		require.Error(t, err, in)
	}
}

// TestValidFixtures checks that every testdata/taskfile/valid file parses,
// plugin checks included, without any diagnostic.
func TestValidFixtures(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join(testdata, "valid", "*.hcl"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			task, diags := ParseFile(path, Options{CheckPlugins: true})
			require.Empty(t, diags, diags.Error())
			require.NotEmpty(t, task.Steps)
			for _, s := range task.Steps {
				require.Equal(t, filepath.Join(testdata, "plugins", "dummy.wasm"), s.PluginPath)
			}
		})
	}
}
