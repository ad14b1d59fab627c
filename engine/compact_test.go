package engine_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/engine/handoff"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// TestCompactionKeepsProtectedFactsVerbatim: 20 protected facts (5
// constraints, 5 decisions, 5 completed steps, 5 failed attempts) survive
// 10 rounds of a deliberately lossy summariser verbatim: it never sees a
// decision, its try to replace one is refused, and the record keeps which
// notes each summary replaced.
func TestCompactionKeepsProtectedFactsVerbatim(t *testing.T) {
	t.Parallel()
	constraints := []string{"never write to the site", "keep  two spaces", "ask before emailing", "cite sources", "no deploys on Friday"}
	decisions := []string{"use NewClient.Fetch", "skip /admin pages", "treat 301 as ok", "retry 5xx twice", "report in  Markdown"}
	var src strings.Builder
	src.WriteString("task \"fidelity\" {\n  objective = \"Audit the site\"\n  constraints = [")
	for i, c := range constraints {
		if i > 0 {
			src.WriteString(", ")
		}
		fmt.Fprintf(&src, "%q", c)
	}
	src.WriteString("]\n")
	for i, d := range decisions {
		fmt.Fprintf(&src, "  step \"s%d\" {\n    plugin = \"handoff.wasm\"\n    input = { mode = \"decide\", text = %q }\n  }\n", i+1, d)
	}
	src.WriteString(`  step "work" {
    plugin   = "handoff.wasm"
    for_each = range(5)
    input    = { mode = "work" }
    retry {
      attempts = 2
      backoff  = "1ms"
    }
  }
  step "compact" {
    plugin      = "handoff.wasm"
    for_each    = range(10)
    concurrency = 1
    input       = { mode = "compact" }
  }
}
`)
	b := setup(t, src.String())
	testwasm.Copy(t, testwasm.GoGuest(t, "handoff"), filepath.Join(b.dir, "handoff.wasm"))
	task := b.submit(t, nil)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)

	var h *handoff.Bundle
	var notes []ledger.Note
	var failed []*ledger.Attempt
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		var err error
		if h, err = handoff.Build(r, task.ID, time.Now()); err != nil {
			return err
		}
		if notes, err = r.Notes(task.ID); err != nil {
			return err
		}
		as, err := r.Attempts(task.ID, 5)
		for _, a := range as {
			if a.Failure != nil {
				failed = append(failed, a)
			}
		}
		return err
	}))
	require.Equal(t, constraints, h.Constraints, "constraints verbatim")
	var texts []string
	for _, d := range h.Decisions {
		texts = append(texts, d.Text)
	}
	require.Equal(t, decisions, texts, "decisions verbatim")
	var done []string
	for _, s := range h.Completed {
		done = append(done, s.Name)
	}
	require.Equal(t, []string{"s1", "s2", "s3", "s4", "s5", "work", "compact"}, done)
	require.Len(t, failed, 5, "every failed attempt is on record")
	for _, a := range failed {
		require.Equal(t, fmt.Sprintf("plugin handoff.wasm: item %d: first try fails", a.Item), a.Failure.Message)
	}

	// Ten rounds: the first replaced the 20 findings, each later one the
	// summary before it; none saw a decision, each was refused one.
	for i := range 10 {
		var out struct {
			Listed          int      `json:"listed"`
			Kinds           []string `json:"kinds"`
			DecisionRefused bool     `json:"decision_refused"`
		}
		require.NoError(t, b.e.Read(func(r ledger.Reader) error {
			raw, err := r.StepOutput(task.ID, 6)
			if err != nil {
				return err
			}
			var all []json.RawMessage
			if err := json.Unmarshal(raw, &all); err != nil {
				return err
			}
			return json.Unmarshal(all[i], &out)
		}))
		require.True(t, out.DecisionRefused, "round %d", i)
		require.NotContains(t, out.Kinds, "decision", "round %d", i)
		if i == 0 {
			require.Equal(t, 20, out.Listed, "5 findings of the decide steps and 15 of the work items")
		} else {
			require.Equal(t, []string{"summary"}, out.Kinds, "round %d", i)
		}
	}
	summaries, open := 0, 0
	for _, n := range notes {
		if n.Kind == ledger.NoteSummary {
			summaries++
			require.NotEmpty(t, n.Replaces)
		}
		if !ledger.Protected(n.Kind) && n.ReplacedBy == 0 {
			open++
		}
		if n.Kind == ledger.NoteFinding {
			require.NotZero(t, n.ReplacedBy, "the record says which summary replaced finding %d", n.Seq)
		}
	}
	require.Equal(t, 10, summaries)
	require.Equal(t, 1, open, "the last summary stands for everything")
	require.Equal(t, 20, h.Findings.Total)
	require.Len(t, h.Findings.Recent, 1)
	require.Equal(t, "1 notes", h.Findings.Recent[0].Text)
}

// TestCompactNotesPolicy: the library's compact-notes policy keeps the
// open notes of a 300-unit fan-out near its bound while it runs, the
// summaries keeping the number of findings, and the decision whole.
func TestCompactNotesPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t, `
task "audit" {
  step "pages" {
    plugin      = "handoff.wasm"
    for_each    = range(300)
    concurrency = 8
    input       = { mode = "page" }
  }
}`)
	root := testwasm.ModuleRoot(t)
	testwasm.Copy(t, testwasm.GoGuest(t, "handoff"), filepath.Join(b.dir, "handoff.wasm"))
	testwasm.Copy(t, testwasm.BuildGo(t, filepath.Join(root, "plugins/examples/compactor")), filepath.Join(b.dir, "compactor.wasm"))
	writeFile(t, filepath.Join(b.dir, "policies", "compact-notes.hcl"),
		library(t, "compact-notes", map[string]string{"../plugins/examples/compactor/compactor.wasm": "../compactor.wasm"}))
	task, _, err := b.e.Submit(b.ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{Policies: []string{"compact-notes"}})
	require.NoError(t, err)
	got := b.work(t, task.ID)
	require.Equal(t, ledger.Succeeded, got.Status, got.Reason)
	var h *handoff.Bundle
	var open []ledger.Note
	require.NoError(t, b.e.Read(func(r ledger.Reader) error {
		var err error
		if h, err = handoff.Build(r, task.ID, time.Now()); err != nil {
			return err
		}
		open, err = r.OpenNotes(task.ID, -1, 1000)
		return err
	}))
	require.Equal(t, 300, h.Findings.Total)
	require.NotZero(t, h.Findings.Summaries)
	require.LessOrEqual(t, len(open), 50+8, "the last window compacted what was open (units in flight may add a few)")
	require.Len(t, h.Decisions, 1)
	require.Equal(t, "pages under /old are out of scope", h.Decisions[0].Text)
	last := open[len(open)-1]
	if last.Kind == ledger.NoteSummary {
		require.Contains(t, last.Text, "findings of step pages")
	}
	var summarised bool
	for _, n := range open {
		if n.Kind == ledger.NoteSummary && strings.HasPrefix(n.Text, "300 findings") {
			summarised = true
		}
	}
	require.True(t, summarised, "a summary keeps the number of every finding it stands for: %v", open)
}
