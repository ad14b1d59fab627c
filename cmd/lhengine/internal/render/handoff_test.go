package render

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
)

// TestHandoffRendering: the handoff a person reads, for a task waiting for
// an approval with completed and pending steps, decisions, blockers,
// findings, an artifact, facts and a drift (testdata/status/api.golden;
// go test -update rewrites it).
func TestHandoffRendering(t *testing.T) {
	t.Parallel()
	at := func(min int) time.Time { return time.Date(2026, 3, 4, 12, min, 0, 0, time.Local) }
	b := &api.Handoff{
		Task:        api.HandoffTask{ID: "t-0001", Name: "migrate", Status: api.WaitingApproval, Reason: "waits for approval 2 of step deploy item 0"},
		Objective:   "Rename OldClient to NewClient everywhere",
		Constraints: []string{"never push to main", "keep  the public API"},
		Checkpoint:  api.Checkpoint{Step: "deploy", StepIndex: 2, Pass: 2, Done: 7, Total: 8, Repairs: 1, Epoch: 19, LastEvent: 41, Updated: at(30)},
		Completed: []api.CompletedStep{
			{Name: "plan", Pass: 1, Units: 1, EvidenceTotal: 1, Evidence: []api.Evidence{{Item: 0, Attempt: 1, Owner: "s1/worker-7", Committed: at(1)}}},
			{Name: "rename", Pass: 2, Units: 12, EvidenceTotal: 12, Evidence: []api.Evidence{
				{Item: 0, Attempt: 2, Owner: "s2/worker-9", Committed: at(20)}, {Item: 1, Attempt: 2, Owner: "s2/worker-9", Committed: at(21)}}},
		},
		Pending:       []api.PendingStep{{Name: "deploy", Planned: true, Units: 1, Waiting: 1}, {Name: "evidence"}},
		Decisions:     []api.Note{{Kind: "decision", Text: "use NewClient.Fetch, not NewClient.Get", Step: "plan"}},
		Blockers:      []api.Note{{Kind: "blocker", Text: "billing/invoice.go is generated", Step: "rename", Item: 4}},
		BlockersTotal: 1,
		Findings:      api.HandoffFindings{Total: 31, Recent: []api.Note{{Kind: "summary", Text: "30 findings of step rename", Step: "compact"}, {Kind: "finding", Text: "orders.go: 2 calls", Step: "rename", Item: 3}}},
		Artifacts:     []api.HandoffArtifact{{Ref: "sha256:ab12", Name: "evidence.json", Step: "evidence", Size: 812}}, ArtifactsTotal: 1,
		Environment: &api.HandoffEnvironment{Facts: map[string]string{"head": "1343490", "config": "47fa661"}, Read: at(29),
			Drift: &api.FactChange{Name: "head", Old: "6877655", New: "1343490", At: at(15), Action: "restart:rename"}},
		Waiting:     api.HandoffWaiting{Approvals: []api.Approval{{ID: "2", Step: "deploy", Item: 0, Prompt: "Set client_version to 2.0.0?"}}, Effects: []string{}},
		NextActions: []string{"lhengine approve t-0001 2 --note TEXT  # or reject: Set client_version to 2.0.0?", "lhengine cancel t-0001"},
	}
	var out bytes.Buffer
	Handoff(&out, b)
	golden := filepath.Join("..", "..", "..", "..", "testdata", "status", "handoff.golden")
	if *updateGolden {
		require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), out.String())
}
