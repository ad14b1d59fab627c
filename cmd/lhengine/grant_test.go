package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/testpolicy"
	"github.com/lhengine/lhengine/internal/testwasm"
)

// grabPolicy inserts, after every step, a step that mounts the host's root
// and may fetch from anywhere on loopback: capabilities the task grants no
// step of its own.
var grabPolicy = testpolicy.Insert("grab", `    after  = "*"
    plugin = "../files.wasm"
    input  = { mode = "read", path = "/mnt/root${step.anchor.output.secret}" }
    mount "root" {
      source = "/"
    }
    http {
      allow = ["127.0.0.1:*"]
    }`)

// TestPolicyCannotGrantWhatTheTaskDoesNot runs a one-step task that grants
// nothing with a policy whose inserted step mounts / to read a file outside
// the task: validate and run refuse it, naming the policy, the step and
// each grant in the policy file; with --grant-policy grab validate lists
// the grants, the run reads the file and its manifest lists them.
func TestPolicyCannotGrantWhatTheTaskDoesNot(t *testing.T) {
	t.Parallel()
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "shadow")
	require.NoError(t, os.WriteFile(secret, []byte("root:secret-hash"), 0o600))
	b := setupCLI(t, `
task "t" {
  step "main" {
    plugin    = "step.wasm"
    workspace = "none"
    input     = { mode = "echo", secret = "`+secret+`" }
  }
}
`)
	testwasm.Copy(t, testwasm.CGuest(t, "files"), filepath.Join(b.dir, "files.wasm"))
	policyFile := filepath.Join(b.dir, "policies", "grab.hcl")
	require.NoError(t, os.MkdirAll(filepath.Dir(policyFile), 0o755))
	require.NoError(t, os.WriteFile(policyFile, []byte(grabPolicy), 0o644))
	taskFile := filepath.Join(b.dir, "task.hcl")

	refused := func(errOut string) {
		t.Helper()
		require.Contains(t, errOut, "grab@1")
		require.Contains(t, errOut, `"grab.grab@main"`)
		require.Contains(t, errOut, `mount "root"`)
		require.Contains(t, errOut, "127.0.0.1:*")
		require.Contains(t, errOut, "workspace rw")
		require.Contains(t, errOut, "--grant-policy grab")
		require.Contains(t, errOut, policyFile+":12:5", "the mount block, in the policy file")
		require.Contains(t, errOut, policyFile+":16:15", "the allow list, in the policy file")
		require.NotContains(t, errOut, "secret-hash")
	}
	code, out, errOut := b.lh(t, "validate", taskFile, "--policy", "grab")
	require.Equal(t, exitFailed, code, out)
	refused(errOut)

	code, out, errOut = b.lh(t, "run", taskFile, "--policy", "grab")
	require.Equal(t, exitFailed, code, out)
	refused(errOut)
	require.NotContains(t, out, "secret-hash")

	// Granted on the command line: validate lists what the policy brings.
	out = lhOK(t, b, "validate", taskFile, "--policy", "grab", "--grant-policy", "grab")
	require.Contains(t, out, "is valid")
	for _, want := range []string{"grab@1", "grab.grab@main", `mount "root" (/)`, "http.fetch 127.0.0.1:*", "--grant-policy"} {
		require.Contains(t, out, want)
	}
	out = lhOK(t, b, "-o", "json", "validate", taskFile, "--policy", "grab", "--grant-policy", "grab")
	var v struct {
		Valid  bool `json:"valid"`
		Grants []struct {
			Policy, Step, Capability string
			ByTask                   bool `json:"by_task"`
			Granted                  bool `json:"granted"`
		} `json:"grants"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	require.True(t, v.Valid)
	require.Len(t, v.Grants, 3, out) // the mount, the host, and a workspace: the task's step has none
	for _, g := range v.Grants {
		require.Equal(t, "grab@1", g.Policy)
		require.Equal(t, "grab.grab@main", g.Step)
		require.True(t, g.Granted)
		require.False(t, g.ByTask)
	}

	out = lhOK(t, b, "-o", "json", "run", taskFile, "--policy", "grab", "--grant-policy", "grab")
	var task api.Task
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &task), out)
	require.JSONEq(t, `{"ok":true,"data":"root:secret-hash"}`, string(task.Output))

	out = lhOK(t, b, "-o", "json", "manifest", task.ID)
	var m api.Manifest
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	require.Len(t, m.Policies, 1)
	require.Len(t, m.Grants, 3, out)
	for _, g := range m.Grants {
		require.Equal(t, "grab@1", g.Policy)
		require.True(t, g.Granted)
	}
	out = lhOK(t, b, "manifest", task.ID)
	for _, want := range []string{"grab@1", `grab.grab@main`, `mount "root" (/)`, "http.fetch 127.0.0.1:*", "granted by --grant-policy"} {
		require.Contains(t, out, want)
	}
}

// TestPolicyMayUseWhatTheTaskGrants: an inserted step may have what a step
// of the task has (the same mount source, a host the task allows), and
// validate lists it as granted by the task.
func TestPolicyMayUseWhatTheTaskGrants(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(data, "f"), []byte("shared"), 0o644))
	b := setupCLI(t, `
task "t" {
  step "main" {
    plugin = "step.wasm"
    input  = { mode = "echo", secret = "/f" }
    mount "root" {
      source = "`+data+`"
    }
    http {
      allow = ["127.0.0.1:*"]
    }
  }
}
`)
	testwasm.Copy(t, testwasm.CGuest(t, "files"), filepath.Join(b.dir, "files.wasm"))
	policyFile := filepath.Join(b.dir, "policies", "grab.hcl")
	require.NoError(t, os.MkdirAll(filepath.Dir(policyFile), 0o755))
	require.NoError(t, os.WriteFile(policyFile, []byte(strings.Replace(grabPolicy, `source = "/"`, `source = "`+data+`"`, 1)), 0o644))
	taskFile := filepath.Join(b.dir, "task.hcl")

	out := lhOK(t, b, "validate", taskFile, "--policy", "grab")
	require.Contains(t, out, "granted by the task")
	out = lhOK(t, b, "-o", "json", "run", taskFile, "--policy", "grab")
	require.Contains(t, out, `"data": "shared"`)
}
