package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/ledger"
)

// A task's page: GET /tasks/{id}, with what it shows of the longer lists
// in the query, so that every view is a link and works without a script:
//
//	?events=all          every event; without it, the events a person
//	                     looks for (routineEvents left out)
//	?events_before=SEQ   the page of events before sequence number SEQ
//	                     (older events); without it, the newest
//	?step=N&units_from=I the units of step N (numbered from 1, as
//	                     lhengine status does) from item I on

// Limits of what one task page shows; the API has the rest.
const (
	pageUnits   = 100      // units of a fan-out step
	pageEvents  = 100      // events
	pageNotes   = 200      // most recent notes
	pageOutput  = 64 << 10 // bytes of one step's output
	pageLog     = 64 << 10 // bytes of the failed attempt's log
	pageSubject = 2000     // bytes of an approval's subject
	pageVar     = 2000     // bytes of a variable's value
)

// routineEvents are the events of work going as planned, which the task
// page leaves out unless asked (?events=all): what is left is what a
// person looks for (failures, retries, repairs, pauses, approvals,
// drift, budgets, resumes, cancellations, effects, takeovers, the end).
var routineEvents = []ledger.EventType{ledger.EvSubmitted, ledger.EvStarted, ledger.EvStepStarted, ledger.EvUnitDone,
	ledger.EvStepDone, ledger.EvModelCall, ledger.EvNotesCompacted}

// routine reports whether the task page hides e unless asked.
func routine(e ledger.EventType) bool { return slices.Contains(routineEvents, e) }

// taskPageQuery is what a task page shows of its longer lists.
type taskPageQuery struct {
	AllEvents    bool
	EventsBefore uint64 // 0: the newest
	UnitsStep    int    // index of the step whose units are paged; -1 none
	UnitsFrom    int
}

func parseTaskPageQuery(v url.Values, steps int) (taskPageQuery, error) {
	q := taskPageQuery{UnitsStep: -1}
	switch e := v.Get("events"); e {
	case "", "notable":
	case "all":
		q.AllEvents = true
	default:
		return q, fmt.Errorf("events %q: want all, or nothing for the events a person looks for", e)
	}
	if b := v.Get("events_before"); b != "" {
		n, err := strconv.ParseUint(b, 10, 64)
		if err != nil || n == 0 {
			return q, fmt.Errorf("events_before %q: want an event's sequence number (1, 2, ...)", b)
		}
		q.EventsBefore = n
	}
	if s := v.Get("step"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > steps {
			return q, fmt.Errorf("step %q: want a step number from 1 to %d", s, steps)
		}
		q.UnitsStep = n - 1
		if f := v.Get("units_from"); f != "" {
			if q.UnitsFrom, err = strconv.Atoi(f); err != nil || q.UnitsFrom < 0 {
				return q, fmt.Errorf("units_from %q: want an item number (0, 1, ...)", f)
			}
		}
	}
	return q, nil
}

// url is the page of task id under q.
func (q taskPageQuery) url(id string) string {
	v := url.Values{}
	if q.AllEvents {
		v.Set("events", "all")
	}
	if q.EventsBefore > 0 {
		v.Set("events_before", strconv.FormatUint(q.EventsBefore, 10))
	}
	if q.UnitsStep >= 0 {
		v.Set("step", strconv.Itoa(q.UnitsStep+1))
		if q.UnitsFrom > 0 {
			v.Set("units_from", strconv.Itoa(q.UnitsFrom))
		}
	}
	u := "/tasks/" + url.PathEscape(id)
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	return u
}

// taskView is everything the task page shows, read in one snapshot.
type taskView struct {
	listRow
	Manifest api.ManifestSummary
	Vars     []varView
	// Progress is the task's progress as lhengine status shows it; the
	// page shows its Line.
	Progress *api.Progress
	Steps    []stepView
	// Timeline are the passes of steps and the repairs, oldest first;
	// TimelineMore how many older ones are left out; From and To the
	// times at its ends.
	Timeline            []*passBar
	TimelineMore        int
	TimelineFrom        time.Time
	TimelineTo          time.Time
	Failure             *failureView
	Counters            []counter
	Notes               []ledger.Note // newest first
	NotesMore           uint64        // older notes not shown
	Events              eventsView
	Artifacts           []ledger.Provenance
	Effects             []effectView
	Waiting             int // effects waiting for a person
	Pending, Closed     []approvalView
	Budgets             []budgetView
	Raise, RaiseCommand string

	CanCancel, CanResume, CanRetry, CanPause bool
	// Back is the page's own address when it has a query (a filter, a
	// page of events or units): its forms return there.
	Back string
}

// AnyCompleted: some step completed (the outputs section has something).
func (v taskView) AnyCompleted() bool {
	return slices.ContainsFunc(v.Steps, func(s stepView) bool { return s.Completed })
}

// UnitsPage is how many units a page of a step's units shows.
func (taskView) UnitsPage() int { return pageUnits }

// eventsView is the page of events the task page shows.
type eventsView struct {
	List []ledger.Event // newest first
	All  bool           // routine events are shown too
	// Live: the page shows the newest events, so the script adds new ones.
	Live bool
	// Routine are the event types left out unless All, for the script.
	Routine string
	// Older links to the page of older events, Newest back to the newest
	// ("" when there is none or this is it), Toggle to the same page
	// with routine events shown (or left out again).
	Older, Newest, Toggle string
	// Hidden counts the routine events the page's range left out.
	Hidden int
}

// varView is one variable of the run manifest.
type varView struct {
	Name, Value string
}

// stepView is one step of the task page.
type stepView struct {
	ledger.StepState
	Index     int
	Number    int // as lhengine status numbers it: from 1
	Completed bool
	Output    string // pretty JSON of a completed step's output
	OutputErr string // why it is not shown
	// Duration is how long its latest pass took (has taken, if it goes
	// on); Passes how many passes the timeline has of it.
	Duration string
	Passes   int
	// UnitList is a page of a fan-out step's units, from item UnitsFrom;
	// UnitsOpen: it is the page the query asked for. UnitsPrev and
	// UnitsNext link to the neighbouring pages ("" for none).
	UnitList             []*ledger.Unit
	UnitsFrom, UnitsLast int
	UnitsOpen            bool
	UnitsPrev, UnitsNext string
}

// failureView is why the task failed (or the failure it last recorded),
// with the failed attempt's record.
type failureView struct {
	ledger.Failure
	Number     int    // the step's number, from 1; 0 for a failure of no step
	Final      bool   // the task failed of it
	Log        string // the attempt's log, clipped to pageLog
	LogMore    int    // bytes of the log not shown
	Started    time.Time
	Duration   string
	HasAttempt bool
	Command    string // the CLI command that shows the attempts
}

type counter struct {
	Name  string
	Value int64
}

type effectView struct {
	ledger.Effect
	Request string
	Outcome string
	// Waiting: its outcome is unknown and a person must confirm it or ask
	// for it to be performed again.
	Waiting bool
}

func (s *Server) pageTask(w http.ResponseWriter, r *http.Request) {
	var v taskView
	now := time.Now()
	badQuery := ""
	err := s.e.Read(func(rd ledger.Reader) error {
		t, err := find(rd, r)
		if err != nil {
			return err
		}
		q, err := parseTaskPageQuery(r.URL.Query(), len(t.Steps))
		if err != nil {
			badQuery = err.Error()
			return nil
		}
		m, err := rd.Manifest(t.ID)
		if err != nil {
			return err
		}
		v.listRow = row(s.view(t), now)
		if r.URL.RawQuery != "" {
			v.Back = "/tasks/" + url.PathEscape(t.ID) + "?" + r.URL.RawQuery
		}
		v.Manifest = summary(m)
		for _, name := range slices.Sorted(maps.Keys(m.Vars)) {
			v.Vars = append(v.Vars, varView{Name: name, Value: clip(compactJSON(m.Vars[name]), pageVar)})
		}
		// The line lhengine status starts with, from the same numbers
		// (progress.go).
		if v.Progress, err = ReadProgress(rd, t, v.ShownStatus, now); err != nil {
			return err
		}

		// One pass over the event log: the timeline, and the page of
		// events the query asks for.
		tl := newTimeline(t)
		ev, err := readEvents(rd, t, q, tl)
		if err != nil {
			return err
		}
		v.Events = ev
		v.Timeline, v.TimelineMore, v.TimelineFrom, v.TimelineTo = tl.place(now)
		for _, b := range v.Timeline {
			if b.Open {
				b.Outcome = v.ShownStatus // running, paused, waiting for a person, interrupted
			}
		}

		for i, st := range t.Steps {
			sv := stepView{StepState: st, Index: i, Number: i + 1, Completed: st.Planned && st.Done >= st.Units}
			if b := tl.lastPass(i); b != nil {
				sv.Duration = span(b.duration(now))
				for _, o := range tl.bars {
					if o.Step == i && !o.Repair {
						sv.Passes++
					}
				}
			}
			if st.FanOut {
				if err := pageUnitsOf(rd, t, i, q, &sv); err != nil {
					return err
				}
			}
			if sv.Completed {
				out, err := rd.StepOutputLimited(t, i, pageOutput)
				switch {
				case errors.Is(err, ledger.ErrTooLarge):
					sv.OutputErr = fmt.Sprintf("more than %s: read it with GET /v1/tasks/%s/outputs?step=%s", humanSize(pageOutput), t.ID, url.QueryEscape(st.Name))
				case err != nil && !errors.Is(err, ledger.ErrNotFound):
					return err
				case err == nil:
					sv.Output = prettyJSON(out)
				}
			}
			v.Steps = append(v.Steps, sv)
		}
		if v.Failure, err = readFailure(rd, t); err != nil {
			return err
		}
		for name, n := range t.Counters {
			v.Counters = append(v.Counters, counter{name, n})
		}
		slices.SortFunc(v.Counters, func(a, b counter) int { return strings.Compare(a.Name, b.Name) })

		notes, err := rd.Notes(t.ID)
		if err != nil {
			return err
		}
		if len(notes) > pageNotes {
			v.NotesMore = uint64(len(notes) - pageNotes)
			notes = notes[len(notes)-pageNotes:]
		}
		slices.Reverse(notes)
		v.Notes = notes

		if v.Artifacts, err = rd.Artifacts(t.ID); err != nil {
			return err
		}
		effs, err := rd.Effects(t.ID)
		if err != nil {
			return err
		}
		for _, e := range effs {
			ev := effectView{Effect: e, Request: clip(prettyJSON(e.Request), 2000), Outcome: clip(prettyJSON(e.Outcome), 2000),
				Waiting: e.State == ledger.EffectUnknown && e.Mode == "manual"}
			if ev.Waiting {
				v.Waiting++
			}
			v.Effects = append(v.Effects, ev)
		}
		as, err := rd.Approvals(t.ID)
		if err != nil {
			return err
		}
		for _, a := range as {
			av := viewApproval(a, t.Name)
			av.Back = v.Back
			if a.State == ledger.ApprovalPending {
				v.Pending = append(v.Pending, av)
			} else {
				v.Closed = append(v.Closed, av)
			}
		}
		v.Budgets = budgets(t)
		if v.Raise = raise(t); v.Raise != "" {
			v.RaiseCommand = "lhengine resume " + t.ID + " --budget " + v.Raise
		}
		return nil
	})
	if err != nil {
		s.pageError(w, toAPIError(err).HTTPStatus, err.Error(), "/")
		return
	}
	if badQuery != "" {
		s.pageError(w, http.StatusBadRequest, "This page cannot be shown: "+badQuery+".", "/tasks/"+url.PathEscape(r.PathValue("id")))
		return
	}
	st := v.Status
	v.CanCancel = !st.Terminal()
	// A task paused for an effect goes on once the effect is settled;
	// resumed before, it would only pause again.
	v.CanResume = (st == api.Paused && v.Waiting == 0) || v.ShownStatus == api.Interrupted
	v.CanRetry = st == api.Failed || st == api.Cancelled
	v.CanPause = st == api.Queued || st == api.Running || st == api.WaitingApproval
	s.render(w, r, http.StatusOK, "task", s.page(v.Name, v))
}

// readEvents reads the task's event log once, from the start: every
// event goes to tl, and the page of events q asks for is returned (the
// newest pageEvents before q.EventsBefore, routine ones left out unless
// q.AllEvents).
func readEvents(rd ledger.Reader, t *ledger.Task, q taskPageQuery, tl *timeline) (eventsView, error) {
	ev := eventsView{All: q.AllEvents, Live: q.EventsBefore == 0}
	names := make([]string, len(routineEvents))
	for i, e := range routineEvents {
		names[i] = string(e)
	}
	ev.Routine = strings.Join(names, " ")
	before := q.EventsBefore
	if before == 0 || before > t.NextEvent {
		before = t.NextEvent
	}
	// The newest pageEvents+1 that match, in a ring: one more than shown
	// says whether there are older ones.
	ring := make([]ledger.Event, pageEvents+1)
	n := 0
	err := rd.EachEvent(t.ID, 0, func(e *ledger.Event) bool {
		tl.add(e)
		if e.Seq >= before {
			return true
		}
		if !q.AllEvents && routine(e.Type) {
			ev.Hidden++
			return true
		}
		ring[n%len(ring)] = *e
		n++
		return true
	})
	if err != nil {
		return ev, err
	}
	shown := min(n, pageEvents)
	for i := range shown {
		ev.List = append(ev.List, ring[(n-1-i)%len(ring)])
	}
	other := q
	other.AllEvents = !q.AllEvents
	ev.Toggle = other.url(t.ID)
	if n > pageEvents {
		older := q
		older.EventsBefore = ev.List[len(ev.List)-1].Seq
		ev.Older = older.url(t.ID)
	}
	if q.EventsBefore > 0 {
		newest := q
		newest.EventsBefore = 0
		ev.Newest = newest.url(t.ID)
	}
	return ev, nil
}

// pageUnitsOf reads the page of units of fan-out step i the page shows:
// the one q asks for, or its first.
func pageUnitsOf(rd ledger.Reader, t *ledger.Task, i int, q taskPageQuery, sv *stepView) error {
	st := t.Steps[i]
	from := 0
	if q.UnitsStep == i {
		from, sv.UnitsOpen = q.UnitsFrom, true
	}
	if st.Planned && from >= st.Units {
		from = max(0, (st.Units-1)/pageUnits*pageUnits) // past the end: the last page
	}
	// UnitsUpTo decodes the units before the page too; units are keyed by
	// item, so the page starts at item from.
	units, err := rd.UnitsUpTo(t.ID, i, from+pageUnits+1)
	if err != nil {
		return err
	}
	if from > len(units) {
		from = 0
	}
	units = units[from:]
	more := len(units) > pageUnits
	if more {
		units = units[:pageUnits]
	}
	sv.UnitList, sv.UnitsFrom, sv.UnitsLast = units, from, from+len(units)-1
	page := func(at int) string {
		p := q
		p.UnitsStep, p.UnitsFrom = i, at
		return p.url(t.ID) + "#units-" + strconv.Itoa(i)
	}
	if from > 0 {
		sv.UnitsPrev = page(max(0, from-pageUnits))
	}
	if more {
		sv.UnitsNext = page(from + pageUnits)
	}
	return nil
}

// readFailure reads the task's failure with its failed attempt's record;
// nil when the task recorded none.
func readFailure(rd ledger.Reader, t *ledger.Task) (*failureView, error) {
	if t.Failure == nil {
		return nil, nil
	}
	f := &failureView{Failure: *t.Failure, Final: t.Status == ledger.Failed}
	idx := slices.IndexFunc(t.Steps, func(s ledger.StepState) bool { return s.Name == f.Step })
	if idx < 0 {
		return f, nil
	}
	f.Number = idx + 1
	if f.Attempt <= 0 {
		return f, nil // no attempt failed: the step's plan did
	}
	f.Command = fmt.Sprintf("lhengine outputs %s %s --attempts --item %d", t.ID, f.Step, f.Item)
	a, err := rd.Attempt(t.ID, idx, f.Item, f.Attempt)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return f, nil
	case err != nil:
		return nil, err
	}
	f.HasAttempt, f.Started = true, a.Started
	if !a.Finished.IsZero() {
		f.Duration = span(a.Finished.Sub(a.Started))
	}
	f.Log = string(a.Log)
	if len(f.Log) > pageLog {
		f.LogMore = len(f.Log) - pageLog
		f.Log = clip(f.Log, pageLog)
	}
	return f, nil
}

// budgetView is one budget with a limit, as the task page shows it.
type budgetView struct {
	Name        string
	Used, Limit string  // in the budget's unit (wall_time as a duration)
	Fraction    float64 // used / limit, at most 1 (the bar)
	Percent     int     // of the limit used
	Warn        bool    // at 80% of the limit or more: the engine warned
	Reached     bool
}

// budgetWarn is the share of a limit at which the engine warns (store).
const budgetWarn = 0.8

// budgets lists the budgets of t that have a limit, in the budget
// block's order.
func budgets(t *ledger.Task) []budgetView {
	if t.Budget == nil {
		return nil
	}
	var out []budgetView
	for _, name := range ledger.BudgetOrder {
		limit := budgetLimit(t.Budget.Limits, name)
		if limit <= 0 {
			continue
		}
		used := t.BudgetUsage(name)
		f := used / limit
		out = append(out, budgetView{Name: name, Used: budgetAmount(name, used), Limit: budgetAmount(name, limit),
			Fraction: min(f, 1), Percent: int(f * 100), Warn: f >= budgetWarn, Reached: f >= 1})
	}
	return out
}

// budgetLimit is the limit of budget name (wall_time in seconds), 0 for none.
func budgetLimit(l ledger.BudgetLimits, name string) float64 {
	switch name {
	case ledger.BudgetWallTime:
		return l.WallTime.Seconds()
	case ledger.BudgetCost:
		return l.Cost
	case ledger.BudgetUnits:
		return float64(l.Units)
	case ledger.BudgetRepairs:
		return float64(l.Repairs)
	case ledger.BudgetConsecutiveFailures:
		return float64(l.ConsecutiveFailures)
	}
	return 0
}

// budgetAmount writes an amount of budget name as the CLI reads it back
// (lhengine resume --budget): wall_time as a duration, others as numbers.
func budgetAmount(name string, v float64) string {
	if name == ledger.BudgetWallTime {
		return (time.Duration(v * float64(time.Second))).Round(time.Second).String()
	}
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}

// raise is what raises the budget that paused t by its own limit again,
// or a step's repair.max by one repair (as lhengine pause and resume
// print it); "" when neither paused it.
func raise(t *ledger.Task) string {
	p := t.Pause
	if t.Status != ledger.Paused || p == nil {
		return ""
	}
	switch p.Kind {
	case ledger.PauseBudget:
		return p.Name + "=+" + budgetAmount(p.Name, p.Limit)
	case ledger.PauseRepairs:
		return ledger.BudgetRepairs + "=+1"
	}
	return ""
}

// compactJSON is a JSON value on one line, with <, > and & shown as
// themselves (the page's template escapes them).
func compactJSON(b json.RawMessage) string {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return string(b)
	}
	return unescapeHTML(out.String())
}
