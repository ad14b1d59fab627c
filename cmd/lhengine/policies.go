package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
	"github.com/lhengine/lhengine/engine"
)

// policyLib is the search path flags shared by the policies subcommands.
type policyLib struct {
	dirs []string
	task string
}

func (l *policyLib) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&l.dirs, "policies", nil, "look for policies in DIR too, after policies/ beside --task's file (or ./policies) and before HOME/policies (repeatable)")
	cmd.Flags().StringVar(&l.task, "task", "", "search policies/ beside this task file instead of ./policies")
}

// load reads the library on the search path; a mistake in any file is
// rendered on stderr and ends the command with exit status 1. It reads
// HOME/policies as a plain directory and never opens the home.
func (a *app) loadPolicies(l *policyLib) ([]engine.PolicyInfo, error) {
	list, diags := engine.Policies(engine.PolicySearchPath(l.task, l.dirs, a.home), l.dirs)
	if err := diags.Write(a.stderr, 0, false); err != nil {
		return nil, err
	}
	if diags.HasErrors() {
		return nil, &exitError{code: exitFailed}
	}
	return list, nil
}

func (a *app) policiesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policies",
		Short: "The harness policy library on the search path: list, show and compare versions",
		Long: `Read the harness policies on the search path (specs/policies.md): policies/
beside --task's file (./policies without --task), each --policies DIR, then
HOME/policies. These commands read policy files only; they never open the
home, except diff against a task ID, which asks its owner for the manifest.
A policy file with mistakes is reported as file:line:col, exit 1.`,
	}
	cmd.AddCommand(a.policiesLsCmd(), a.policiesShowCmd(), a.policiesDiffCmd())
	return cmd
}

func (a *app) policiesLsCmd() *cobra.Command {
	var lib policyLib
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "Every policy version on the search path, with its file:line, sha256 and assumption",
		Long: `List every policy version found on the search path, in search order: name,
version, file:line, the first 12 characters of the sha256 a run manifest
would pin, the assumption (truncated), and for a copy of a name and version
found again in a later directory, the earlier copy that shadows it. -o json
prints everything, the texts included.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := a.loadPolicies(&lib)
			if err != nil {
				return err
			}
			if a.json() {
				if list == nil {
					list = []engine.PolicyInfo{}
				}
				return a.printJSON(list)
			}
			if len(list) == 0 {
				dirs := engine.PolicySearchPath(lib.task, lib.dirs, a.home)
				fmt.Fprintf(a.stdout, "no policies on the search path: %s\n", strings.Join(dirs, ", "))
				fmt.Fprintln(a.stdout, "add a policy file to one of them, or name a folder of them with --policies DIR (repeatable; run, submit and validate take it too)")
				return nil
			}
			return render.Policies(a.stdout, list)
		},
	}
	lib.register(cmd)
	return cmd
}

func (a *app) policiesShowCmd() *cobra.Command {
	var lib policyLib
	cmd := &cobra.Command{
		Use:   "show NAME[@VERSION]",
		Short: "One policy version: its text as a run pins it, file:line, assumption, evidence, inserts, params, overrides",
		Long: `Show the policy version a run selecting NAME[@VERSION] would apply (NAME
alone: the highest version): where it is, its sha256, assumption and
evidence, the steps it inserts, its params and overrides, then the block's
text exactly as a run manifest pins it. -o json prints the same as data.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := a.loadPolicies(&lib)
			if err != nil {
				return err
			}
			p, err := engine.FindPolicy(list, args[0])
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(p)
			}
			return render.Policy(a.stdout, p)
		},
	}
	lib.register(cmd)
	return cmd
}

// policyText is one side of a diff.
type policyText struct {
	Ref    string `json:"ref"`
	From   string `json:"from"` // file:line, or "task ID"
	SHA256 string `json:"sha256"`
	Text   string `json:"-"`
	Line   int    `json:"-"`
}

func (a *app) policiesDiffCmd() *cobra.Command {
	var lib policyLib
	cmd := &cobra.Command{
		Use:   "diff NAME[@A] NAME[@B] | NAME[@A] TASK_ID",
		Short: "A unified diff of two policy versions, or of one and the version a task pinned",
		Long: `Compare the texts of two policy versions on the search path, or of one and
the text of the same policy pinned in task ID's manifest (read through the
home's owner, as lhengine manifest does), as a unified line diff with the
files' line numbers. -o json prints both sides' refs and sha256s and the
diff.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := a.loadPolicies(&lib)
			if err != nil {
				return err
			}
			p, err := engine.FindPolicy(list, args[0])
			if err != nil {
				return err
			}
			left := policyText{Ref: p.Ref(), From: fmt.Sprintf("%s:%d", render.ShortPath(p.File), p.Line), SHA256: p.SHA256, Text: p.Text, Line: p.Line}
			var right policyText
			if engine.IsPolicyRef(args[1]) {
				q, err := engine.FindPolicy(list, args[1])
				if err != nil {
					return err
				}
				right = policyText{Ref: q.Ref(), From: fmt.Sprintf("%s:%d", render.ShortPath(q.File), q.Line), SHA256: q.SHA256, Text: q.Text, Line: q.Line}
			} else {
				ctx := cmd.Context()
				err := a.withClient(ctx, func(c *api.Client) error {
					m, err := c.Manifest(ctx, args[1])
					if err != nil {
						return err
					}
					for _, pin := range m.Policies {
						if pin.Name == p.Name {
							right = policyText{Ref: pin.Ref(), From: "task " + m.ID, SHA256: pin.SHA256, Text: pin.Text, Line: pin.Line}
							return nil
						}
					}
					return fmt.Errorf("task %s pins no version of policy %q", m.ID, p.Name)
				})
				if err != nil {
					return err
				}
			}
			var diff strings.Builder
			if left.SHA256 != right.SHA256 {
				render.Unified(&diff, left.Ref+" "+left.From, right.Ref+" "+right.From,
					render.Lines(left.Text), render.Lines(right.Text), left.Line, right.Line)
			}
			if a.json() {
				return a.printJSON(map[string]any{"a": left, "b": right, "same": left.SHA256 == right.SHA256, "diff": diff.String()})
			}
			if diff.Len() == 0 {
				fmt.Fprintf(a.stdout, "%s (%s) and %s (%s) have the same text, sha256 %s\n", left.Ref, left.From, right.Ref, right.From, left.SHA256)
				return nil
			}
			_, err = io.WriteString(a.stdout, diff.String())
			return err
		},
	}
	lib.register(cmd)
	return cmd
}
