package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lhengine/lhengine/api"
)

// Report prints the progress report of a task (lhengine status): the
// Summary, then the details.
func Report(w io.Writer, rep *api.Report) {
	t, m := rep.Task, rep.Manifest
	Summary(w, rep) // what a person reads first
	done, total := t.Progress()
	pct := 0
	if total > 0 {
		pct = done * 100 / total
	}
	fmt.Fprintf(w, "task %s %q: %s\n", t.ID, t.Name, t.ShownStatus)
	if t.ShownStatus == api.Interrupted {
		fmt.Fprintf(w, "  note:        no process is working on it (last change %s ago); resume it with: lhengine resume %s\n",
			time.Since(t.UpdatedAt).Round(time.Second), t.ID)
	}
	if m.Objective != "" {
		fmt.Fprintf(w, "  objective:   %s\n", m.Objective)
	}
	for _, c := range m.Constraints {
		fmt.Fprintf(w, "  constraint:  %s\n", c)
	}
	fmt.Fprintf(w, "  progress:    %d/%d units (%d%%) · step %d/%d %s\n", done, total, pct, t.Cursor+1, len(t.Steps), t.Steps[min(t.Cursor, len(t.Steps)-1)].Name)
	fmt.Fprintf(w, "  attempts:    %d started · %d failed · %d consecutive failures · %d leases taken over",
		t.Attempts, t.Failures, t.ConsecutiveFailures, t.Reclaims)
	switch {
	case t.Retries == 1:
		fmt.Fprint(w, " · retried once")
	case t.Retries > 1:
		fmt.Fprintf(w, " · retried %d times", t.Retries)
	}
	fmt.Fprintln(w)
	if t.Repairs > 0 {
		fmt.Fprintf(w, "  repairs:     %d (last: %s)\n", t.Repairs, t.RepairReason)
	}
	fmt.Fprintf(w, "  lease:       epoch %d", t.Epoch)
	if t.Leases > 0 {
		fmt.Fprintf(w, " · %d units leased · last owner %s until %s", t.Leases, t.LeaseOwner, t.LeaseUntil.Local().Format(time.TimeOnly))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  created:     %s\n", t.CreatedAt.Local().Format(time.DateTime))
	if !t.FinishedAt.IsZero() {
		fmt.Fprintf(w, "  finished:    %s (%s after start)\n", t.FinishedAt.Local().Format(time.DateTime), t.FinishedAt.Sub(t.CreatedAt).Round(time.Millisecond))
	}
	if t.Reason != "" {
		fmt.Fprintf(w, "  reason:      %s\n", t.Reason)
	}
	if rep.Progress != nil && len(rep.Progress.Budget) > 0 {
		fmt.Fprintf(w, "  budget:      %s\n", rep.Progress.BudgetSummary())
	}
	if d := t.Drift; d != nil {
		fmt.Fprintf(w, "  drift:       fact %s changed from %s to %s at %s (on_drift %s)\n",
			d.Name, OrNone(d.Old), OrNone(d.New), d.At.Local().Format(time.DateTime), d.Action)
	}
	if t.Failure != nil && t.Failure.String() != t.Reason {
		// A failed unit's reason is its failure: say it once.
		fmt.Fprintf(w, "  failure:     %s\n", t.Failure)
	}
	if len(t.Counters) > 0 {
		names := make([]string, 0, len(t.Counters))
		for n := range t.Counters {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s %d", n, t.Counters[n])
		}
		fmt.Fprintf(w, "  counts:      %s\n", strings.Join(parts, " · "))
	}
	if u := t.ModelUsage; u.Calls > 0 || u.PossiblyBilled.Calls > 0 {
		fmt.Fprintf(w, "  models:      %d calls · %d input tokens · %d output tokens · cost %s",
			u.Calls, u.InputTokens, u.OutputTokens, strconv.FormatFloat(u.Cost, 'f', -1, 64))
		if p := u.PossiblyBilled; p.Calls > 0 {
			// Sends no one saw the answer of (in flight at a crash), counted apart.
			fmt.Fprintf(w, " · %d possibly billed (%d request bytes, cost at most %s)",
				p.Calls, p.RequestBytes, strconv.FormatFloat(p.MaxCost, 'f', -1, 64))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "  steps:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    #\tSTEP\tUNITS\tDONE\tLEASED\tPASS\t")
	for i, s := range t.Steps {
		units := "-"
		if s.Planned {
			units = fmt.Sprint(s.Units)
		}
		mark := " "
		if i == t.Cursor && !t.Status.Terminal() {
			mark = ">"
		}
		fan := ""
		switch {
		case s.Every > 0 && s.Anchor < len(t.Steps):
			fan = fmt.Sprintf(" (every %d of %s)", s.Every, t.Steps[s.Anchor].Name)
		case s.FanOut:
			fan = fmt.Sprintf(" (fan-out ≤%d)", s.Limit)
		}
		if s.Failed > 0 {
			fan += fmt.Sprintf(" · %d failed (allowed %d)", s.Failed, s.Allowed())
		}
		fmt.Fprintf(tw, "  %s %d\t%s%s\t%s\t%d\t%d\t%d\t\n", mark, i+1, s.Name, fan, units, s.Done, s.Leased, s.Pass)
	}
	tw.Flush()
	for _, s := range t.Steps {
		if s.Failed > 0 {
			fmt.Fprintf(w, "  failed items: lhengine failures %s lists them; lhengine retry %s runs them again\n", t.ID, t.ID)
			break
		}
	}
}

// Summary prints what a person reads first of a status (rep.Progress):
// the progress line, the counters with their labels, the notes by kind
// (the newest 3 of each), and what waits for a person with the command
// that continues. Every list is capped: the summary is a few dozen lines
// whatever the size of the task.
func Summary(w io.Writer, rep *api.Report) {
	p, t := rep.Progress, rep.Task
	if p == nil {
		return
	}
	fmt.Fprintln(w, p.Line())
	if len(p.Counters) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, c := range p.Counters {
			fmt.Fprintf(tw, "  %s\t%s\n", c.Label, api.Thousands(c.Value))
		}
		tw.Flush()
	}
	for _, g := range p.Notes {
		count := api.Thousands(g.Count)
		if g.Estimated {
			count += fmt.Sprintf(" of the last %s notes", api.Thousands(int64(g.Of)))
		}
		fmt.Fprintf(w, "%s: %s\n", kindTitle(g.Kind), count)
		for _, n := range g.Newest {
			fmt.Fprintf(w, "  %s (%s[%d], %s)\n", OneLine(n.Text, 100), n.Step, n.Item, n.Time.Local().Format(time.DateTime))
		}
		if g.More > 0 {
			fmt.Fprintf(w, "  %s more: lhengine notes %s --kind %s\n", api.Thousands(g.More), t.ID, g.Kind)
		}
	}
	wt := p.Waiting
	if wt.Approvals == 0 && wt.Effects == 0 && wt.Paused == "" && t.Status != api.WaitingApproval {
		return
	}
	fmt.Fprintln(w, "waiting for you:")
	for _, ap := range wt.Pending {
		expires := ""
		if !ap.Expires.IsZero() {
			expires = " · expires " + ap.Expires.Local().Format(time.DateTime)
		}
		fmt.Fprintf(w, "  approval %s · %s[%d] · %s%s · lhengine approve %s %s\n", ap.ID, ap.Step, ap.Item, OneLine(ap.Prompt, 80), expires, t.ID, ap.ID)
	}
	if more := wt.Approvals - len(wt.Pending); more > 0 {
		fmt.Fprintf(w, "  %s more approvals: lhengine approvals %s\n", api.Thousands(int64(more)), t.ID)
	}
	switch {
	case wt.Effects == 1:
		fmt.Fprintf(w, "  1 unit waits for an effect to be settled: lhengine effects %s\n", t.ID)
	case wt.Effects > 1:
		fmt.Fprintf(w, "  %s units wait for an effect to be settled: lhengine effects %s\n", api.Thousands(int64(wt.Effects)), t.ID)
	}
	if wt.Paused != "" {
		fmt.Fprintf(w, "  paused: %s\n", wt.Paused)
	}
	if t.Status == api.Paused || t.Status == api.WaitingApproval {
		fmt.Fprintf(w, "  continue: %s\n", Continue(&t))
	}
}

// kindTitle is the heading of the notes of kind: "findings", "decisions".
func kindTitle(kind string) string {
	switch kind {
	case api.NoteFinding, api.NoteDecision, api.NoteBlocker:
		return kind + "s"
	case api.NoteSummary:
		return "summaries"
	}
	return kind + " notes"
}

// Continue is the command that continues a paused task: a budget
// that paused it is raised by its own limit again (wall_time as a
// duration); a step's repair.max by one repair.
func Continue(t *api.Task) string {
	cmd := "lhengine resume " + t.ID
	if t.Status == api.WaitingApproval {
		return fmt.Sprintf("lhengine approvals %s, then lhengine approve %s APPROVAL (or reject), then %s", t.ID, t.ID, cmd)
	}
	p := t.Pause
	if p == nil {
		return cmd
	}
	switch p.Kind {
	case api.PauseBudget:
		delta := strconv.FormatFloat(p.Limit, 'f', -1, 64)
		if p.Name == api.BudgetWallTime {
			delta = (time.Duration(p.Limit * float64(time.Second))).Round(time.Second).String()
		}
		return fmt.Sprintf("%s --budget %s=+%s", cmd, p.Name, delta)
	case api.PauseRepairs:
		return cmd + " --budget repairs=+1"
	}
	return cmd
}

// Tasks prints the task table and, when total says the list was
// cut, how many more there are.
func Tasks(w io.Writer, tasks []api.Task, total int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tPROGRESS\tSTEP\tUPDATED")
	for _, t := range tasks {
		done, total := t.Progress()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", t.ID, t.Name, t.ShownStatus, done, total,
			t.Steps[min(t.Cursor, len(t.Steps)-1)].Name, t.UpdatedAt.Local().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	More(w, total-len(tasks), "tasks")
	return nil
}

// More says that n more of what is listed were left out, and how to
// see them all.
func More(w io.Writer, n int, what string) {
	if n > 0 {
		fmt.Fprintf(w, "… %d more %s: --limit 0 for all\n", n, what)
	}
}

// Items prints the committed items of a step, one line each, and
// how many more there are. finished says the step completed its pass.
func Items(w io.Writer, step string, finished bool, part *api.Committed) {
	switch {
	case finished:
		fmt.Fprintf(w, "== %s (pass %d): %d items\n", step, part.Pass, part.Committed)
	case part.Planned:
		fmt.Fprintf(w, "== %s (pass %d, running): %d committed so far, of %d units\n", step, part.Pass, part.Committed, part.Units)
	default:
		fmt.Fprintf(w, "== %s (pass %d, running): %d committed so far, units not all planned yet\n", step, part.Pass, part.Committed)
	}
	for _, it := range part.Items {
		fmt.Fprintf(w, "item %d: %s\n", it.Item, CompactJSON(it.Output))
	}
	More(w, part.Committed-len(part.Items), "items")
}

// Attempts prints the attempts of task t, each with where it stood (its
// pass and try), its failure, environment, output and log.
func Attempts(w io.Writer, t *api.Task, all []*api.Attempt) {
	for _, at := range all {
		state := "ok"
		switch {
		case at.Failure != nil:
			state = string(at.Failure.Kind)
		case at.Repair != "":
			state = "needs repair: " + at.Repair
		}
		// Attempt numbers go on over passes and retries; the pass and the
		// try within its retry budget say where the attempt stood.
		where := ""
		if at.Pass > 0 {
			where = fmt.Sprintf("pass %d try %d, ", at.Pass, at.Try)
		}
		fmt.Fprintf(w, "== %s item %d attempt %d (%sepoch %d, %s): %s\n", t.Steps[at.Step].Name, at.Item, at.Attempt, where, at.Epoch,
			at.Finished.Sub(at.Started).Round(time.Microsecond), state)
		if at.Failure != nil {
			fmt.Fprintf(w, "   %s\n", at.Failure.Message)
		}
		if len(at.Environment) > 0 {
			facts := make([]string, 0, len(at.Environment))
			for _, name := range slices.Sorted(maps.Keys(at.Environment)) {
				facts = append(facts, name+"="+at.Environment[name])
			}
			fmt.Fprintf(w, "   environment: %s\n", strings.Join(facts, " "))
		}
		if len(at.Output) > 0 {
			fmt.Fprintf(w, "%s\n", IndentJSON(at.Output))
		}
		if len(at.Log) > 0 {
			fmt.Fprintf(w, "   log:\n%s\n", Indent(string(at.Log), "     "))
		}
	}
}

// Event prints one event of a task's log on a line.
func Event(w io.Writer, e *api.Event) {
	where := e.Step
	if e.Item != nil && where != "" {
		where = fmt.Sprintf("%s[%d]", e.Step, *e.Item)
	}
	extra := ""
	if e.Attempt > 0 {
		extra += fmt.Sprintf(" attempt=%d", e.Attempt)
	}
	if e.Epoch > 0 {
		extra += fmt.Sprintf(" epoch=%d", e.Epoch)
	}
	if e.Kind != "" {
		extra += " kind=" + string(e.Kind)
	}
	msg := ""
	if e.Message != "" {
		msg = " · " + e.Message
	}
	fmt.Fprintf(w, "%5d %s %-13s %s%s%s\n", e.Seq, e.Time.Local().Format(time.DateTime), e.Type, where, extra, msg)
}
