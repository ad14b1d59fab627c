package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/lhengine/lhengine/api"
)

func (a *app) handoffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "handoff ID",
		Short: "The bundle a fresh context resumes the task from: objective, constraints, steps done and to do, decisions, blockers, facts, next actions",
		Long: `handoff prints what a fresh model context (a new agent session, a new
worker, a person coming back) needs to pick the task up, read from the task's
durable records only: the objective and constraints verbatim; the checkpoint
(the step under the cursor, its pass, units done, the last event); the
completed steps with the evidence of their commits (which attempt, by whom,
when; the first few units of a fan-out, with the count); the pending steps;
every decision, verbatim; the newest blockers and findings, with their
counts; the newest artifacts; the environment facts as last read and the
last drift; what waits for a person (approvals, effects, a pause); and the
valid next actions as commands.

-o json and -o yaml print the bundle as data (the same as GET
/v1/tasks/{id}/handoff and a plugin's handoff.get).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd.Context(), func(c *api.Client) error {
				b, err := c.Handoff(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				switch a.output {
				case "json":
					return a.printJSON(b)
				case "yaml":
					enc := yaml.NewEncoder(a.stdout)
					enc.SetIndent(2)
					if err := enc.Encode(toYAML(b)); err != nil {
						return err
					}
					return enc.Close()
				}
				writeHandoff(a.stdout, b)
				return nil
			})
		},
	}
}

// toYAML is the bundle as the JSON shape (the field names of -o json), for
// the YAML encoder, which does not read json tags.
func toYAML(b *api.Handoff) any {
	raw, err := json.Marshal(b)
	if err != nil {
		return b
	}
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return b
	}
	return v
}

// writeHandoff renders the bundle for a person.
func writeHandoff(w io.Writer, b *api.Handoff) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("handoff of task %s %q (%s)", b.Task.ID, b.Task.Name, b.Task.Status)
	if b.Task.Reason != "" {
		p(": %s", b.Task.Reason)
	}
	p("\n\nobjective:\n  %s\n", orNone(b.Objective))
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
		p("  - [%s item %d] %s\n", n.Step, n.Item, summary(n.Text, 120))
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
