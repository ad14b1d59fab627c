package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lhengine/lhengine/api"
)

// statusSummary prints what a person reads first of a status (rep.Progress):
// the progress line, the counters with their labels, the notes by kind
// (the newest 3 of each), and what waits for a person with the command
// that continues. Every list is capped: the summary is a few dozen lines
// whatever the size of the task.
func statusSummary(w io.Writer, rep *api.Report) {
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
			fmt.Fprintf(w, "  %s (%s[%d], %s)\n", oneLine(n.Text, 100), n.Step, n.Item, n.Time.Local().Format(time.DateTime))
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
		fmt.Fprintf(w, "  approval %s · %s[%d] · %s%s · lhengine approve %s %s\n", ap.ID, ap.Step, ap.Item, oneLine(ap.Prompt, 80), expires, t.ID, ap.ID)
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
		fmt.Fprintf(w, "  continue: %s\n", continueCommand(&t))
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

// oneLine is s on one line, cut to at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
