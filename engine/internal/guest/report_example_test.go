package guest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// TestReportExample drives plugins/examples/report the way its task.hcl
// asks: draft, verify (which asks for a repair), draft again with the
// repair, verify, finalize.
func TestReportExample(t *testing.T) {
	t.Parallel()
	r := sharedRuntime(t)
	ctx := context.Background()
	load := func(step string) *Plugin {
		dir := filepath.Join(testwasm.ModuleRoot(t), "plugins", "examples", "report", step)
		return loadAs(t, r, step+".wasm", testwasm.BuildGo(t, dir))
	}
	draft, verify, finalize := load("draft"), load("verify"), load("finalize")
	run := func(p *Plugin, step string, attempt int, repair *Repair, input string) *Result {
		t.Helper()
		res, err := p.Run(ctx, Request{TaskID: "t1", TaskName: "report", Step: step, Attempt: attempt,
			Repair: repair, Input: json.RawMessage(input)}, Limits{}, nil)
		require.NoError(t, err)
		return res
	}

	d1 := run(draft, "draft", 1, nil, `{"topic":"durable execution"}`)
	require.NotContains(t, string(d1.Output), "Risks")
	v1 := run(verify, "verify", 1, nil, string(d1.Output))
	require.True(t, v1.NeedsRepair)
	require.Equal(t, "missing section: Risks", v1.RepairReason)
	require.Contains(t, string(v1.Log), `section "Risks" is missing`)

	repair := &Repair{Count: 1, Reason: v1.RepairReason}
	d2 := run(draft, "draft", 1, repair, `{"topic":"durable execution"}`)
	require.Contains(t, string(d2.Log), "repair pass 1: missing section: Risks")
	v2 := run(verify, "verify", 1, repair, string(d2.Output))
	require.False(t, v2.NeedsRepair)
	require.JSONEq(t, `{"ok":true,"checked":["Summary","Background","Findings","Risks"],"words":54}`, string(v2.Output))

	f := run(finalize, "finalize", 1, nil, `{"draft":`+string(d2.Output)+`,"verdict":`+string(v2.Output)+`}`)
	var report struct {
		Text  string
		Words int
	}
	require.NoError(t, json.Unmarshal(f.Output, &report))
	require.True(t, strings.HasPrefix(report.Text, "# A short report on durable execution\n\n## Summary\n"))
	require.Contains(t, report.Text, "\n## Risks\n\nSteps may run twice")
	require.Equal(t, len(strings.Fields(report.Text)), report.Words)

	// Deterministic: the same request gives the same bytes.
	require.Equal(t, d2.Output, run(draft, "draft", 2, repair, `{"topic":"durable execution"}`).Output)
}
