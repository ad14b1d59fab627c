package main

import (
	"encoding/json"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
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
				render.Handoff(a.stdout, b)
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
