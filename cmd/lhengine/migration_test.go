package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/testgit"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// migrationEvidence is the evidence.json the migration example's last step
// writes.
type migrationEvidence struct {
	Task         string `json:"task"`
	HeadBefore   string `json:"head_before"`
	HeadAfter    string `json:"head_after"`
	ChecksPassed bool   `json:"checks_passed"`
	Checks       int    `json:"checks"`
	FilesChanged []struct {
		File         string `json:"file"`
		Replacements int    `json:"replacements"`
		SHA256       string `json:"sha256"`
		Head         string `json:"head"`
	} `json:"files_changed"`
	Approval struct {
		ID        string `json:"id"`
		Decision  string `json:"decision"`
		DecidedBy string `json:"decided_by"`
		Note      string `json:"note"`
	} `json:"approval"`
}

// TestMigrationExample does what make migration-demo does, with the real
// binary, the example's plugins and a real git repository: the run
// returns with exit code 3 on the deploy change's approval; a commit lands
// on HEAD while it waits; another command approves; the resume records the
// drift of fact head and, as on_drift = "restart:rename" says, runs rename
// and check again over the new HEAD and asks again; once that is approved
// the task succeeds, and its evidence artifact holds the checks, the
// decision (who, the note) and the HEAD before and after.
func TestMigrationExample(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("git is needed: %v", err)
		}
		t.Skipf("git is needed: %v", err)
	}
	b := setupProcs(t)
	example := filepath.Join(testwasm.ModuleRoot(t), "plugins/examples/migration")
	work := filepath.Join(b.dir, "migration")
	repo := filepath.Join(work, "repo")
	require.NoError(t, os.CopyFS(repo, os.DirFS(filepath.Join(example, "testdata/repo"))))
	for _, p := range []string{"plan", "rename", "check", "deploy", "evidence"} {
		testwasm.Copy(t, testwasm.BuildGo(t, filepath.Join(example, p)), filepath.Join(work, p+".wasm"))
	}
	task, err := os.ReadFile(filepath.Join(example, "task.hcl"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(work, "task.hcl"), task, 0o644))
	testgit.Run(t, repo, "init", "-q")
	testgit.Run(t, repo, "add", "-A")
	testgit.Run(t, repo, "commit", "-q", "-m", "every service on OldClient")
	before := testgit.Run(t, repo, "rev-parse", "HEAD")

	code, out, errOut := b.lh(t, "run", filepath.Join(work, "task.hcl"))
	require.Equal(t, 3, code, "the run returns on the approval:\n%s\n%s", out, errOut)
	id := taskID(out)
	require.Len(t, id, 26, out)
	require.Contains(t, out, "waiting_approval")
	as := b.approvalsJSON(t)
	require.Len(t, as, 1, "one approval pending")
	first := as[0]
	require.Equal(t, id, first.Task)
	require.Equal(t, "deploy-config", first.Step)
	require.Equal(t, ledger.ApprovalFromPlugin, first.Source)
	require.Equal(t, ledger.ApprovalPending, first.State)
	require.Contains(t, string(first.Subject), `client_version: \"2.0.0\"`, "the subject is the diff")

	// A colleague's commit lands while the task waits: one more use of
	// the old name in a file of the plan.
	changed, err := os.ReadFile(filepath.Join(example, "testdata/colleague/billing/invoice.go"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "billing/invoice.go"), changed, 0o644))
	testgit.Run(t, repo, "commit", "-q", "-am", "billing: credit notes")
	after := testgit.Run(t, repo, "rev-parse", "HEAD")
	require.NotEqual(t, before, after)

	code, out, errOut = b.lh(t, "approve", id, first.ID, "--note", "client 2.0.0 is live in staging")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	code, out, errOut = b.lh(t, "resume", id)
	require.Equal(t, 3, code, "the resume runs the stale steps again and asks again:\n%s\n%s", out, errOut)

	events := b.eventsJSON(t, id)
	var drifts []ledger.Event
	started := map[string]int{}
	for _, e := range events {
		switch e.Type {
		case ledger.EvDrift:
			drifts = append(drifts, e)
		case ledger.EvStepStarted:
			started[e.Step]++
		}
	}
	require.Len(t, drifts, 1, "one drift")
	require.Equal(t, "head", drifts[0].Fact.Name)
	require.Equal(t, before, drifts[0].Fact.Old)
	require.Equal(t, after, drifts[0].Fact.New)
	require.Equal(t, "restart:rename", drifts[0].Fact.Action)
	require.Equal(t, map[string]int{"plan": 1, "rename": 2, "check": 2, "deploy-config": 2}, started,
		"the plan is kept; rename, check and deploy-config run again")
	as = b.approvalsJSON(t)
	require.Len(t, as, 1, "the deploy change, in its new pass, is asked again")
	second := as[0]
	require.NotEqual(t, first.ID, second.ID)

	note := "re-checked at " + after[:12]
	code, out, errOut = b.lh(t, "approve", id, second.ID, "--note", note)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	code, out, errOut = b.lh(t, "resume", id)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	rep := b.status(t, id)
	require.Equal(t, api.Succeeded, rep.Task.Status, rep.Task.Reason)
	as = b.approvalsJSON(t, id)
	require.Len(t, as, 2)
	require.Equal(t, ledger.ApprovalApproved, as[1].State)
	require.NotEmpty(t, as[1].DecidedBy)

	out = lhOK(t, b, "outputs", "-o", "json", id, "evidence")
	var ref struct {
		Evidence   string `json:"evidence"`
		HeadBefore string `json:"head_before"`
		HeadAfter  string `json:"head_after"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &ref), out)
	require.True(t, strings.HasPrefix(ref.Evidence, "sha256:"), out)
	out = lhOK(t, b, "artifact", "get", ref.Evidence)
	var ev migrationEvidence
	require.NoError(t, json.Unmarshal([]byte(out), &ev), out)
	require.Equal(t, id, ev.Task)
	require.True(t, ev.ChecksPassed)
	require.Equal(t, 7, ev.Checks, "two per file and one over the repository")
	require.Equal(t, second.ID, ev.Approval.ID)
	require.Equal(t, "approved", ev.Approval.Decision)
	require.Equal(t, as[1].DecidedBy, ev.Approval.DecidedBy)
	require.Equal(t, note, ev.Approval.Note)
	require.Equal(t, before, ev.HeadBefore, "the HEAD the plan was made against")
	require.Equal(t, after, ev.HeadAfter, "the HEAD the task ended at")
	require.Len(t, ev.FilesChanged, 3)
	want := strings.ReplaceAll(string(changed), "OldClient", "NewClient")
	sum := sha256.Sum256([]byte(want))
	require.Equal(t, "billing/invoice.go", ev.FilesChanged[0].File)
	require.Equal(t, 6, ev.FilesChanged[0].Replacements, "converted again from the new HEAD")
	require.Equal(t, hex.EncodeToString(sum[:]), ev.FilesChanged[0].SHA256)
	for _, f := range ev.FilesChanged {
		require.Equal(t, after, f.Head, f.File)
	}
}

// eventsJSON reads a task's events through the CLI (-o json: one event a
// line).
func (b *procBundle) eventsJSON(t *testing.T, id string) []ledger.Event {
	t.Helper()
	out := lhOK(t, b, "events", "-o", "json", id)
	var evs []ledger.Event
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e ledger.Event
		require.NoError(t, dec.Decode(&e), out)
		evs = append(evs, e)
	}
	return evs
}
