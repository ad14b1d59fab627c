package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
)

func (a *app) manifestCmd() *cobra.Command {
	var text bool
	cmd := &cobra.Command{
		Use:   "manifest ID",
		Short: "The run manifest pinned at submit: versions, task source hash, variables, plugins, policies, models, prompts, replay set",
		Long: `Show the run manifest of a task, fixed when it was submitted: the engine and
ABI versions, the task file and the sha256 of its pinned source, the variable
values, each step's plugin with its sha256, the harness policies the run
applies (NAME@VERSION with the sha256 of the pinned text) and every
capability of the steps they insert (a mount, a host, an effect, a
workspace, a model: granted by the task, whose steps have it too, or by
--grant-policy), the models the task
declares (name, provider, model id, base URL, the name of the environment
variable holding the key, never a key, and prices), its prompts (name,
version, sha256 of the pinned text) and, for a task submitted with
--model-replay, the replay set its model calls are answered from (the folder
it was read from, the number of recordings and the set's sha256). The run uses
these pins, never the files they came from, so editing a policy, plugin or
prompt file, or the replay folder, does not change a submitted task. --text
adds the pinned policy and prompt texts; -o json prints everything, the task
source included.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.withClient(ctx, func(c *api.Client) error {
				m, err := c.Manifest(ctx, args[0])
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(m)
				}
				return a.printManifest(m, text)
			})
		},
	}
	cmd.Flags().BoolVar(&text, "text", false, "print the pinned text of each policy and prompt")
	return cmd
}

func (a *app) printManifest(m *api.Manifest, text bool) error {
	s := m.Summary
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "task\t%s\n", m.ID)
	fmt.Fprintf(w, "engine\t%s (plugin ABI %s)\n", s.EngineVersion, s.ABI)
	fmt.Fprintf(w, "source\t%s\n", s.Filename)
	fmt.Fprintf(w, "source sha256\t%s\n", s.SourceSHA256)
	if s.Objective != "" {
		fmt.Fprintf(w, "objective\t%s\n", s.Objective)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	names := make([]string, 0, len(s.Vars))
	for k := range s.Vars {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(a.stdout, "\nvariables (%d)\n", len(names))
	for _, k := range names {
		fmt.Fprintf(a.stdout, "  %s = %s\n", k, compactJSON(s.Vars[k]))
	}
	steps := make([]string, 0, len(s.Plugins))
	for k := range s.Plugins {
		steps = append(steps, k)
	}
	sort.Strings(steps)
	fmt.Fprintf(a.stdout, "\nplugins (%d)\n", len(steps))
	w = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, k := range steps {
		p := s.Plugins[k]
		fmt.Fprintf(w, "  %s\t%s\t%s\n", k, p.SHA256, p.Path)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\npolicies (%d)\n", len(m.Policies))
	w = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, p := range m.Policies {
		fmt.Fprintf(w, "  %s\t%s\t%s:%d\n", p.Ref(), p.SHA256, p.Filename, p.Line)
	}
	for _, g := range m.Grants {
		fmt.Fprintf(w, "  grant\t%s %s: %s\t%s\n", g.Policy, g.Step, g.Capability, grantedBy(g.ByTask))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nmodels (%d)\n", len(s.Models))
	w = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, md := range s.Models {
		key := "no key"
		if md.APIKeyEnv != "" {
			key = "key $" + md.APIKeyEnv
		}
		fmt.Fprintf(w, "  model %s\t%s\t%s\t%s\t%s\tprices %g/%g per 1M tokens\n", md.Name, md.Provider, md.ID, md.BaseURL, key, md.InputPrice, md.OutputPrice)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nprompts (%d)\n", len(s.Prompts))
	w = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, p := range s.Prompts {
		from := p.File
		if from == "" {
			from = "(text in the task file)"
		}
		fmt.Fprintf(w, "  prompt %s\t%s\t%s\t%s\n", p.Name, cmp.Or(p.Version, "-"), p.SHA256, from)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if r := s.ModelReplay; r != nil {
		fmt.Fprintf(a.stdout, "\nreplay set: %d recordings (%d bytes) from %s, sha256 %s\n", r.Recordings, r.Bytes, r.Dir, r.SHA256)
	} else {
		fmt.Fprintf(a.stdout, "\nreplay set: none (model calls go to the providers)\n")
	}
	if text {
		for _, p := range m.Policies {
			fmt.Fprintf(a.stdout, "\n# %s (%s:%d, sha256 %s)\n%s\n", p.Ref(), p.Filename, p.Line, p.SHA256, strings.TrimRight(p.Text, "\n"))
		}
		for _, p := range m.Prompts {
			fmt.Fprintf(a.stdout, "\n# prompt %s %s (sha256 %s)\n%s\n", p.Name, cmp.Or(p.Version, "-"), p.SHA256, strings.TrimRight(p.Text, "\n"))
		}
	}
	return nil
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
