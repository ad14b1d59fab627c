package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
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
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tVERSION\tFILE\tSHA256\tASSUMPTION\tSHADOWED BY")
			for _, p := range list {
				shadow := ""
				if p.ShadowedBy != "" {
					shadow = shortPath(p.ShadowedBy)
				}
				fmt.Fprintf(w, "%s\t%d\t%s:%d\t%s\t%s\t%s\n", p.Name, p.Version, shortPath(p.File), p.Line, p.SHA256[:12], truncate(p.Assumption, 50), shadow)
			}
			return w.Flush()
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
			return a.printPolicy(p)
		},
	}
	lib.register(cmd)
	return cmd
}

func (a *app) printPolicy(p engine.PolicyInfo) error {
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "policy\t%s\n", p.Ref())
	fmt.Fprintf(w, "file\t%s:%d:%d\n", shortPath(p.File), p.Line, p.Column)
	fmt.Fprintf(w, "sha256\t%s\n", p.SHA256)
	fmt.Fprintf(w, "assumption\t%s\n", p.Assumption)
	fmt.Fprintf(w, "evidence\t%s\n", p.Evidence.Text)
	if p.Evidence.Result != "" {
		fmt.Fprintf(w, "eval result\t%s\n", p.Evidence.Result)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\ninserts (%d)\n", len(p.Inserts))
	w = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, in := range p.Inserts {
		fmt.Fprintf(w, "  %s.%s@STEP\t%s %q\t%s\n", p.Name, in.Name, in.Where, in.Glob, in.Plugin)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	names := make([]string, 0, len(p.Params))
	for k := range p.Params {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(a.stdout, "\nparams (%d) for steps %q\n", len(names), p.Steps)
	for _, k := range names {
		fmt.Fprintf(a.stdout, "  %s = %s\n", k, compactJSON(p.Params[k]))
	}
	fmt.Fprintf(a.stdout, "\noverrides (%d)\n", len(p.Overrides))
	for _, o := range p.Overrides {
		fields := make([]string, 0, len(o.Fields))
		for k, v := range o.Fields {
			fields = append(fields, k+" = "+v)
		}
		sort.Strings(fields)
		fmt.Fprintf(a.stdout, "  steps %q: %s\n", o.Steps, strings.Join(fields, ", "))
	}
	fmt.Fprintf(a.stdout, "\ntext (pinned as is; sha256 %s)\n%s\n", p.SHA256, p.Text)
	return nil
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
			left := policyText{Ref: p.Ref(), From: fmt.Sprintf("%s:%d", shortPath(p.File), p.Line), SHA256: p.SHA256, Text: p.Text, Line: p.Line}
			var right policyText
			if engine.IsPolicyRef(args[1]) {
				q, err := engine.FindPolicy(list, args[1])
				if err != nil {
					return err
				}
				right = policyText{Ref: q.Ref(), From: fmt.Sprintf("%s:%d", shortPath(q.File), q.Line), SHA256: q.SHA256, Text: q.Text, Line: q.Line}
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
				writeUnified(&diff, left.Ref+" "+left.From, right.Ref+" "+right.From,
					splitLines(left.Text), splitLines(right.Text), left.Line, right.Line)
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

func splitLines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// diffOp is one line of a line diff: kind ' ' (in both), '-' (only in a) or
// '+' (only in b); ai and bi count the lines of a and b before it.
type diffOp struct {
	kind   byte
	ai, bi int
	text   string
}

// diffLines is a line diff of a and b along a longest common subsequence.
func diffLines(a, b []string) []diffOp {
	n, m := len(a), len(b)
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, diffOp{' ', i, j, a[i]})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] > lcs[i+1][j]):
			ops = append(ops, diffOp{'+', i, j, b[j]})
			j++
		default:
			ops = append(ops, diffOp{'-', i, j, a[i]})
			i++
		}
	}
	return ops
}

// writeUnified writes a unified diff of a and b with three lines of context;
// lineA and lineB are the file lines the texts start at (1 for none).
func writeUnified(w io.Writer, nameA, nameB string, a, b []string, lineA, lineB int) {
	const context = 3
	ops := diffLines(a, b)
	fmt.Fprintf(w, "--- %s\n+++ %s\n", nameA, nameB)
	for i := 0; i < len(ops); {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		start, last := max(0, i-context), i
		for j := i; j < len(ops) && j-last <= 2*context; j++ {
			if ops[j].kind != ' ' {
				last = j
			}
		}
		stop := min(len(ops), last+context+1)
		var na, nb int
		for _, op := range ops[start:stop] {
			if op.kind != '+' {
				na++
			}
			if op.kind != '-' {
				nb++
			}
		}
		sa, sb := ops[start].ai+lineA, ops[start].bi+lineB
		if na == 0 {
			sa--
		}
		if nb == 0 {
			sb--
		}
		fmt.Fprintf(w, "@@ -%d,%d +%d,%d @@\n", sa, na, sb, nb)
		for _, op := range ops[start:stop] {
			fmt.Fprintf(w, "%c%s\n", op.kind, op.text)
		}
		i = stop
	}
}

// shortPath is p relative to the working directory when it is below it.
func shortPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(wd, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return p
	}
	return rel
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
