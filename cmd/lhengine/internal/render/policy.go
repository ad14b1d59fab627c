package render

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/lhengine/lhengine/engine"
)

// Policies prints the table of policy versions on the search path
// (lhengine policies ls), in search order.
func Policies(out io.Writer, list []engine.PolicyInfo) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tVERSION\tFILE\tSHA256\tASSUMPTION\tSHADOWED BY")
	for _, p := range list {
		shadow := ""
		if p.ShadowedBy != "" {
			shadow = ShortPath(p.ShadowedBy)
		}
		fmt.Fprintf(w, "%s\t%d\t%s:%d\t%s\t%s\t%s\n", p.Name, p.Version, ShortPath(p.File), p.Line, p.SHA256[:12], Truncate(p.Assumption, 50), shadow)
	}
	return w.Flush()
}

// Policy prints one policy version (lhengine policies show): where it is,
// what it assumes and does, and its text as a run pins it.
func Policy(out io.Writer, p engine.PolicyInfo) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "policy\t%s\n", p.Ref())
	fmt.Fprintf(w, "file\t%s:%d:%d\n", ShortPath(p.File), p.Line, p.Column)
	fmt.Fprintf(w, "sha256\t%s\n", p.SHA256)
	fmt.Fprintf(w, "assumption\t%s\n", p.Assumption)
	fmt.Fprintf(w, "evidence\t%s\n", p.Evidence.Text)
	if p.Evidence.Result != "" {
		fmt.Fprintf(w, "eval result\t%s\n", p.Evidence.Result)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ninserts (%d)\n", len(p.Inserts))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
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
	fmt.Fprintf(out, "\nparams (%d) for steps %q\n", len(names), p.Steps)
	for _, k := range names {
		fmt.Fprintf(out, "  %s = %s\n", k, CompactJSON(p.Params[k]))
	}
	fmt.Fprintf(out, "\noverrides (%d)\n", len(p.Overrides))
	for _, o := range p.Overrides {
		fields := make([]string, 0, len(o.Fields))
		for k, v := range o.Fields {
			fields = append(fields, k+" = "+v)
		}
		sort.Strings(fields)
		fmt.Fprintf(out, "  steps %q: %s\n", o.Steps, strings.Join(fields, ", "))
	}
	fmt.Fprintf(out, "\ntext (pinned as is; sha256 %s)\n%s\n", p.SHA256, p.Text)
	return nil
}

// Lines splits s into its lines, a last newline ending the last one.
func Lines(s string) []string {
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

// Unified writes a unified diff of a and b with three lines of context;
// lineA and lineB are the file lines the texts start at (1 for none).
func Unified(w io.Writer, nameA, nameB string, a, b []string, lineA, lineB int) {
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
