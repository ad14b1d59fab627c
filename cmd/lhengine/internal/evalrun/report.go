package evalrun

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the result as indented JSON.
func (res *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// rate is "k/n (p%)".
func rate(k, n int) string {
	if n == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d (%.0f%%)", k, n, 100*float64(k)/float64(n))
}

func recovery(f Figures) string {
	if f.CrashRuns == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", f.Recovered, f.CrashRuns)
}

func wall(s float64) string { return fmt.Sprintf("%.2fs", s) }

func cost(c float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.6f", c), "0"), ".")
}

func runRecovery(rr *RunReport) string {
	if rr.Crash == nil {
		return "-"
	}
	if rr.Crash.Recovered {
		return "yes"
	}
	return "no"
}

func runPass(rr *RunReport) string {
	switch {
	case rr.Error != "":
		return "error"
	case rr.Pass:
		return "pass"
	}
	return "fail"
}

// stateHeader is the header of the per-state table.
var stateHeader = []string{"state", "success", "units run", "repeated", "repairs", "wall", "cost", "recovery"}

func stateRow(st StateResult) []string {
	f := st.Figures
	return []string{st.Name, rate(f.Passes, f.Runs), fmt.Sprint(f.Attempts), fmt.Sprint(f.Repeated),
		fmt.Sprint(f.Repairs), wall(f.WallSeconds), cost(f.Cost), recovery(f)}
}

var runHeader = []string{"case", "state", "run", "verdict", "units run", "repeated", "repairs", "wall", "cost", "recovery", "why"}

func runRow(rr *RunReport) []string {
	why := rr.Reason
	if rr.Error != "" {
		why = rr.Error
	} else if rr.Crash != nil && !rr.Crash.Recovered && rr.Crash.Reason != "" {
		why = strings.TrimSpace(why + "; recovery: " + rr.Crash.Reason)
	}
	return []string{rr.Case, rr.State, fmt.Sprint(rr.Repeat), runPass(rr), fmt.Sprint(rr.Attempts), fmt.Sprint(rr.Repeated),
		fmt.Sprint(rr.Repairs), wall(rr.WallSeconds), cost(rr.Cost), runRecovery(rr), why}
}

// WriteText writes the per-state table, then a row per run, as aligned
// columns.
func (res *Result) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(cells []string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }
	row(stateHeader)
	for _, st := range res.States {
		row(stateRow(st))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row(runHeader)
	for _, rr := range res.sortedRuns() {
		row(runRow(rr))
	}
	return tw.Flush()
}

// sortedRuns are the runs by case (in set order), state, then repeat.
func (res *Result) sortedRuns() []*RunReport {
	caseAt, stateAt := map[string]int{}, map[string]int{}
	for i, c := range res.Cases {
		caseAt[c.Name] = i
	}
	for i, s := range res.States {
		stateAt[s.Name] = i
	}
	out := append([]*RunReport(nil), res.Runs...)
	less := func(a, b *RunReport) bool {
		if caseAt[a.Case] != caseAt[b.Case] {
			return caseAt[a.Case] < caseAt[b.Case]
		}
		if stateAt[a.State] != stateAt[b.State] {
			return stateAt[a.State] < stateAt[b.State]
		}
		return a.Repeat < b.Repeat
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && less(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func mdRow(w io.Writer, cells []string) {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(strings.ReplaceAll(c, "|", `\|`), "\n", " ")
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

// WriteMarkdown writes the result as a Markdown report: what was run, the
// per-state table, the policies each state pinned, and a row per run.
func (res *Result) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "# Eval `%s`\n\n", res.Set)
	if res.Description != "" {
		fmt.Fprintf(w, "%s\n\n", res.Description)
	}
	fmt.Fprintf(w, "Set `%s` (sha256 `%.12s`), engine %s, seed %d, %d workers, %s.\n\n",
		filepath.ToSlash(res.File), res.SetSHA256, res.EngineVersion, res.Seed, res.Workers, res.Started.Format("2006-01-02 15:04 UTC"))
	mdRow(w, append([]string(nil), stateHeader...))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(stateHeader)))
	for _, st := range res.States {
		mdRow(w, stateRow(st))
	}
	fmt.Fprintln(w, "\nFigures are summed over each state's runs and read from each run's own store:"+
		" units run are attempts started, repeated are attempts beyond each unit's first (repair passes and"+
		" crashes included), wall is each task's creation to its end, cost is model cost units.")
	fmt.Fprintln(w, "\n## Policies pinned")
	fmt.Fprintln(w)
	for _, st := range res.States {
		pins := "none"
		if len(st.Pins) > 0 {
			var ps []string
			for _, p := range st.Pins {
				ref, sum, _ := strings.Cut(p, " ")
				ps = append(ps, fmt.Sprintf("`%s` (sha256 `%.12s`)", ref, sum))
			}
			pins = strings.Join(ps, ", ")
		}
		fmt.Fprintf(w, "- %s: %s\n", st.Name, pins)
	}
	fmt.Fprintln(w, "\n## Cases")
	fmt.Fprintln(w)
	for _, c := range res.Cases {
		extra := ""
		if c.Crash != "" {
			extra = fmt.Sprintf(", crash at `%s`", c.Crash)
		}
		if c.ModelReplay != "" {
			extra += fmt.Sprintf(", model calls replayed from `%s`", filepath.ToSlash(c.ModelReplay))
		}
		vars, _ := json.Marshal(c.Vars)
		fmt.Fprintf(w, "- `%s`: task `%s` (sha256 `%.12s`), vars `%s`, %d run(s) per state%s; verify: %s\n",
			c.Name, filepath.ToSlash(c.Task), c.TaskSHA256, vars, c.Repeat, extra, c.Verify)
	}
	fmt.Fprintln(w, "\n## Runs")
	fmt.Fprintln(w)
	mdRow(w, append([]string(nil), runHeader...))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(runHeader)))
	for _, rr := range res.sortedRuns() {
		mdRow(w, runRow(rr))
	}
	return nil
}

// Save writes DIR/NAME.json and DIR/NAME.md, each through a temporary file
// renamed into place, and returns their paths.
func (res *Result) Save(dir string) (jsonPath, mdPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	write := func(name string, fn func(io.Writer) error) (string, error) {
		path := filepath.Join(dir, name)
		f, err := os.CreateTemp(dir, name+".*.tmp")
		if err != nil {
			return "", err
		}
		defer os.Remove(f.Name())
		if err := f.Chmod(0o644); err != nil {
			f.Close()
			return "", err
		}
		if err := fn(f); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return "", err
		}
		if err := f.Close(); err != nil {
			return "", err
		}
		return path, os.Rename(f.Name(), path)
	}
	if jsonPath, err = write(res.Set+".json", res.WriteJSON); err != nil {
		return "", "", err
	}
	mdPath, err = write(res.Set+".md", res.WriteMarkdown)
	return jsonPath, mdPath, err
}
