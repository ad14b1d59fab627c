package render

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
)

// Manifest prints the run manifest m (lhengine manifest): the pins of
// the run, and with text the pinned texts of its policies and prompts.
func Manifest(out io.Writer, m *api.Manifest, text bool) error {
	s := m.Summary
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
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
	fmt.Fprintf(out, "\nvariables (%d)\n", len(names))
	for _, k := range names {
		fmt.Fprintf(out, "  %s = %s\n", k, CompactJSON(s.Vars[k]))
	}
	steps := make([]string, 0, len(s.Plugins))
	for k := range s.Plugins {
		steps = append(steps, k)
	}
	sort.Strings(steps)
	fmt.Fprintf(out, "\nplugins (%d)\n", len(steps))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, k := range steps {
		p := s.Plugins[k]
		fmt.Fprintf(w, "  %s\t%s\t%s\n", k, p.SHA256, p.Path)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\npolicies (%d)\n", len(m.Policies))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, p := range m.Policies {
		fmt.Fprintf(w, "  %s\t%s\t%s:%d\n", p.Ref(), p.SHA256, p.Filename, p.Line)
	}
	for _, g := range m.Grants {
		fmt.Fprintf(w, "  grant\t%s %s: %s\t%s\n", g.Policy, g.Step, g.Capability, grantedBy(g.ByTask))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nmodels (%d)\n", len(s.Models))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
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
	fmt.Fprintf(out, "\nprompts (%d)\n", len(s.Prompts))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
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
		fmt.Fprintf(out, "\nreplay set: %d recordings (%d bytes) from %s, sha256 %s\n", r.Recordings, r.Bytes, r.Dir, r.SHA256)
	} else {
		fmt.Fprintf(out, "\nreplay set: none (model calls go to the providers)\n")
	}
	if text {
		for _, p := range m.Policies {
			fmt.Fprintf(out, "\n# %s (%s:%d, sha256 %s)\n%s\n", p.Ref(), p.Filename, p.Line, p.SHA256, strings.TrimRight(p.Text, "\n"))
		}
		for _, p := range m.Prompts {
			fmt.Fprintf(out, "\n# prompt %s %s (sha256 %s)\n%s\n", p.Name, cmp.Or(p.Version, "-"), p.SHA256, strings.TrimRight(p.Text, "\n"))
		}
	}
	return nil
}

// Grants lists what the steps the policies insert may reach.
func Grants(out io.Writer, grants []engine.PolicyGrant) error {
	if len(grants) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\npolicy grants (%d)\n", len(grants))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, g := range grants {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", g.Policy, g.Step, g.Capability, grantedBy(g.ByTask))
	}
	return w.Flush()
}

// grantedBy says why an inserted step may have a capability.
func grantedBy(byTask bool) string {
	if byTask {
		return "granted by the task"
	}
	return "granted by --grant-policy"
}
