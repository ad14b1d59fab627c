package render

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lhengine/lhengine/api"
)

// Handoff renders the bundle for a person.
func Handoff(w io.Writer, b *api.Handoff) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("handoff of task %s %q (%s)", b.Task.ID, b.Task.Name, b.Task.Status)
	if b.Task.Reason != "" {
		p(": %s", b.Task.Reason)
	}
	p("\n\nobjective:\n  %s\n", OrNone(b.Objective))
	p("constraints:\n")
	if len(b.Constraints) == 0 {
		p("  (none)\n")
	}
	for _, c := range b.Constraints {
		p("  - %s\n", c)
	}
	c := b.Checkpoint
	p("checkpoint:\n  step %d %s, pass %d · %d/%d units · %d repairs · last event %d at %s\n",
		c.StepIndex+1, c.Step, c.Pass, c.Done, c.Total, c.Repairs, c.LastEvent, c.Updated.Local().Format(time.DateTime))
	p("completed steps:\n")
	if len(b.Completed) == 0 {
		p("  (none)\n")
	}
	for _, s := range b.Completed {
		p("  %s (pass %d): %d units", s.Name, s.Pass, s.Units)
		if s.Failed > 0 {
			p(", %d failed items tolerated", s.Failed)
		}
		p("\n")
		for _, e := range s.Evidence {
			p("    item %d: attempt %d by %s at %s\n", e.Item, e.Attempt, e.Owner, e.Committed.Local().Format(time.DateTime))
		}
		if n := s.EvidenceTotal - len(s.Evidence); n > 0 {
			p("    and %d more units committed\n", n)
		}
	}
	p("pending steps:\n")
	if len(b.Pending) == 0 {
		p("  (none)\n")
	}
	for _, s := range b.Pending {
		if s.Planned {
			p("  %s: %d/%d units done, %d running, %d waiting\n", s.Name, s.Done, s.Units, s.Leased, s.Waiting)
		} else {
			p("  %s\n", s.Name)
		}
	}
	p("decisions (%d, verbatim):\n", len(b.Decisions))
	for _, n := range b.Decisions {
		p("  - [%s item %d] %s\n", n.Step, n.Item, n.Text)
	}
	p("blockers (%d):\n", b.BlockersTotal)
	for _, n := range b.Blockers {
		p("  - [%s item %d] %s\n", n.Step, n.Item, n.Text)
	}
	p("findings: %d", b.Findings.Total)
	if len(b.Findings.Recent) > 0 {
		p(", newest:")
	}
	p("\n")
	for _, n := range b.Findings.Recent {
		p("  - [%s item %d] %s\n", n.Step, n.Item, OneLine(n.Text, 120))
	}
	if len(b.Artifacts) > 0 {
		p("artifacts (%d):\n", b.ArtifactsTotal)
		for _, a := range b.Artifacts {
			p("  %s %s (%s item %d, %d bytes)\n", a.Ref, a.Name, a.Step, a.Item, a.Size)
		}
	}
	if e := b.Environment; e != nil {
		p("environment (read %s):\n", e.Read.Local().Format(time.DateTime))
		names := make([]string, 0, len(e.Facts))
		for name := range e.Facts {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			p("  %s = %s\n", name, e.Facts[name])
		}
		if e.Drift != nil {
			p("  last drift: %s\n", e.Drift.String())
		}
	}
	if len(b.Waiting.Approvals)+len(b.Waiting.Effects) > 0 || b.Waiting.Pause != nil {
		p("waiting for a person:\n")
		for _, ap := range b.Waiting.Approvals {
			p("  approval %s (step %s item %d): %s\n", ap.ID, ap.Step, ap.Item, ap.Prompt)
		}
		for _, e := range b.Waiting.Effects {
			p("  %s\n", e)
		}
		if b.Waiting.Pause != nil {
			p("  paused: %s\n", b.Waiting.Pause.String())
		}
	}
	p("next actions:\n")
	for _, act := range b.NextActions {
		p("  %s\n", act)
	}
}
