package api

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Progress is a task's progress as a person reads it (Report.Progress,
// specs/api.md): what `lhengine status` shows first, computed in one place
// (server.ReadProgress) so the text and the JSON carry the same numbers.
// Reading it costs the same whatever the number of committed units
// (specs/ledger.md, "Progress").
type Progress struct {
	Name   string `json:"name"`   // the task's name
	Status string `json:"status"` // the shown status
	// Unit names one unit ("pages"); Step is the step counted ("" for
	// every step's units); Pass is that step's pass (a repair enters it
	// again: 2, 3, ...), 0 before it started.
	Unit string `json:"unit"`
	Step string `json:"step,omitempty"`
	Pass int    `json:"pass"`
	// Done is the committed units of the pass; Total its units, null
	// while not known (the step is not planned yet); Percent is Done of
	// Total, null with it.
	Done    int      `json:"done"`
	Total   *int     `json:"total"`
	Percent *float64 `json:"percent"`
	// RatePerS is units committed a second over the last half minute or
	// so; EtaS the seconds left at that rate. Either is null when it
	// cannot be told honestly: fewer than two samples, nothing committed
	// for a minute, the task not running, or (EtaS) no total yet.
	RatePerS *float64 `json:"rate_per_s"`
	EtaS     *float64 `json:"eta_s"`
	// ElapsedS is the time the task has worked, in seconds: some unit
	// leased, not paused nor waiting.
	ElapsedS float64 `json:"elapsed_s"`
	// Counters are the task's counters with the words of the progress
	// block's labels (the name when it has none), by name.
	Counters []Counter `json:"counters"`
	// Notes are the notes by kind: how many, and the newest few.
	Notes   []NoteGroup `json:"notes"`
	Waiting Waiting     `json:"waiting"`
	// Budget is every limit the task has, in the budget block's order.
	Budget []BudgetUse `json:"budget"`
}

// Counter is one counter of a task.
type Counter struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	Value int64  `json:"value"`
}

// NoteGroup is a task's notes of one kind: Count of them, the Newest
// (newest first, at most 3) and More, how many others there are.
// Estimated: the count is of the newest notes only (records written
// before notes were counted by kind), which Of says.
type NoteGroup struct {
	Kind      string `json:"kind"`
	Count     int64  `json:"count"`
	Newest    []Note `json:"newest"`
	More      int64  `json:"more"`
	Estimated bool   `json:"estimated,omitempty"`
	Of        int    `json:"of,omitempty"`
}

// Waiting is what waits for a person.
type Waiting struct {
	// Approvals is the number of pending approvals; Pending the newest of
	// them (at most 5).
	Approvals int               `json:"approvals"`
	Pending   []PendingApproval `json:"pending"`
	// Effects is the number of units waiting for a person to settle an
	// effect whose outcome is unknown (lhengine effects).
	Effects int `json:"effects"`
	// Paused says why a paused task is paused.
	Paused string `json:"paused,omitempty"`
}

// PendingApproval is one approval waiting for a decision.
type PendingApproval struct {
	ID      string    `json:"id"`
	Step    string    `json:"step"`
	Item    int       `json:"item"`
	Prompt  string    `json:"prompt"`
	Expires time.Time `json:"expires,omitzero"`
}

// BudgetUse is one budget's usage: Used of Limit (wall_time in seconds),
// Percent of it.
type BudgetUse struct {
	Name    string  `json:"name"`
	Used    float64 `json:"used"`
	Limit   float64 `json:"limit"`
	Percent float64 `json:"percent"`
}

// Line is the progress in one line, as `lhengine status` starts:
//
//	site-audit · running 1h12m · 1,840 / 3,000 pages (61%) · 24 pages/s · about 48 min left · budget 58% used
func (p *Progress) Line() string {
	parts := []string{p.Name, p.Status + " " + Duration(time.Duration(p.ElapsedS*float64(time.Second)))}
	count := Thousands(int64(p.Done))
	if p.Total != nil {
		count += " / " + Thousands(int64(*p.Total)) + " " + p.Unit
		if p.Percent != nil {
			count += fmt.Sprintf(" (%d%%)", int(math.Floor(*p.Percent)))
		}
	} else {
		count += " " + p.Unit + " / total not known yet"
	}
	if p.Pass > 1 {
		count += fmt.Sprintf(" · pass %d", p.Pass)
	}
	parts = append(parts, count)
	if p.RatePerS != nil {
		parts = append(parts, rate(*p.RatePerS)+" "+p.Unit+"/s")
	}
	if p.EtaS != nil {
		parts = append(parts, "about "+Duration(time.Duration(*p.EtaS*float64(time.Second)))+" left")
	} else if !Status(p.Status).Terminal() {
		parts = append(parts, "time left unknown")
	}
	if len(p.Budget) > 0 {
		most := 0.0
		for _, b := range p.Budget {
			most = max(most, b.Percent)
		}
		parts = append(parts, fmt.Sprintf("budget %d%% used", int(math.Floor(most))))
	}
	return strings.Join(parts, " · ")
}

// rate writes a rate: whole above 10, one decimal below.
func rate(r float64) string {
	if r >= 10 {
		return Thousands(int64(math.Round(r)))
	}
	return strconv.FormatFloat(math.Round(r*10)/10, 'f', -1, 64)
}

// Thousands writes n with a comma between groups of three digits.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Duration writes d for a person, to the minute past an hour and to the
// second below: "1h12m", "48 min", "35s".
func Duration(d time.Duration) string {
	switch {
	case d >= time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	case d >= time.Minute:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
	default:
		return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
	}
}

// ReportNotes is how many of the newest notes a Report carries.
const ReportNotes = 200

// NotesPage is a page of a task's notes: GET /v1/tasks/{id}/notes. Next is
// the seq to ask for the next page from (?from=), 0 when there is none;
// Total is the number of notes the task recorded.
type NotesPage struct {
	Task  string `json:"task"`
	Notes []Note `json:"notes"`
	Next  uint64 `json:"next"`
	Total uint64 `json:"total"`
}

// NotesQuery selects the notes of a page: empty fields select all; Limit
// 0 is the owner's default (100), at most 1,000.
type NotesQuery struct {
	Kind, Step, Grep string
	From             uint64
	Limit            int
}

// Notes returns a page of the notes of task ref that q selects.
func (c *Client) Notes(ctx context.Context, ref string, q NotesQuery) (*NotesPage, error) {
	v := url.Values{}
	for k, s := range map[string]string{"kind": q.Kind, "step": q.Step, "grep": q.Grep} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.From > 0 {
		v.Set("from", strconv.FormatUint(q.From, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	path := taskPath(ref, "notes")
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var p NotesPage
	return &p, c.do(ctx, "GET", path, nil, &p)
}

// BudgetSummary says each budget with its usage, "units 5 of 5, wall_time
// 3m0s of 8h0m0s"; "" for a task without one.
func (p *Progress) BudgetSummary() string {
	parts := make([]string, 0, len(p.Budget))
	for _, b := range p.Budget {
		parts = append(parts, fmt.Sprintf("%s %s of %s", b.Name, usage(b.Name, b.Used), usage(b.Name, b.Limit)))
	}
	return strings.Join(parts, ", ")
}

// usage writes a budget's value: wall_time (seconds) as a duration.
func usage(budget string, v float64) string {
	if budget == BudgetWallTime {
		return (time.Duration(v * float64(time.Second))).Round(time.Second).String()
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
