package server

import (
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/ledger"
)

// What a progress read looks at, whatever the size of the task.
const (
	progressNotes     = 200 // the newest notes, for the newest of each kind
	progressApprovals = 200 // the newest approvals, for the pending ones
	progressNewest    = 3   // notes shown by kind
	progressPending   = 5   // pending approvals shown
	progressCounters  = 20  // counters shown
)

// ReadProgress computes the progress of task t, shown as status shown, at
// now (api.Progress): the one place the status line and report.progress
// come from. It reads the task record, the newest notes and the newest
// approvals by point reads, so its cost does not grow with the units
// committed (specs/ledger.md, "Progress").
func ReadProgress(r ledger.Reader, t *ledger.Task, shown string, now time.Time) (*api.Progress, error) {
	// The newest notes until every kind the record counts has its newest
	// few (or the walk reaches progressNotes).
	notes, err := r.RecentNotes(t, progressNotes, enoughNotes(t.Meter))
	if err != nil {
		return nil, err
	}
	approvals, err := r.RecentApprovals(t, progressApprovals)
	if err != nil {
		return nil, err
	}
	return computeProgress(t, shown, notes, approvals, now), nil
}

// enoughNotes says when the newest notes read hold progressNewest of each
// kind m counts (a kind with fewer: all of them); nil when m counts none.
func enoughNotes(m *ledger.Progress) func([]ledger.Note) bool {
	if m == nil || m.Kinds == nil {
		return nil
	}
	seen := map[string]int64{}
	return func(read []ledger.Note) bool {
		if n := read[len(read)-1]; n.ReplacedBy == 0 {
			seen[n.Kind]++
		}
		for k, c := range m.Kinds {
			if seen[k] < min(c, progressNewest) {
				return false
			}
		}
		return true
	}
}

// computeProgress is ReadProgress on what it read: notes and approvals are
// the newest, newest first.
func computeProgress(t *ledger.Task, shown string, notes []ledger.Note, approvals []ledger.Approval, now time.Time) *api.Progress {
	p := &api.Progress{Name: t.Name, Status: shown, Unit: "units", ElapsedS: t.Elapsed(now).Seconds(),
		Counters: []api.Counter{}, Notes: []api.NoteGroup{}, Budget: []api.BudgetUse{},
		Waiting: api.Waiting{Pending: []api.PendingApproval{}}}
	m := t.Meter
	if m != nil && m.Unit != "" {
		p.Unit = m.Unit
	}

	// How many of how many, in which pass.
	total, known := 0, true
	if m == nil || m.StepIndex < 0 || m.StepIndex >= len(t.Steps) {
		p.Done, total = t.Progress()
	} else {
		st := t.Steps[m.StepIndex]
		p.Step, p.Pass = st.Name, st.Pass
		switch {
		case st.Pass > 0 && t.Cursor < m.StepIndex && !t.Status.Terminal():
			// A repair restarted an earlier step: this step's last pass
			// is withdrawn and its next one not entered yet. Showing the
			// next pass keeps the count from running backwards in one.
			p.Pass, known = st.Pass+1, false
		case st.Planned || st.Units > 0:
			p.Done, total = st.Done, st.Units
		default:
			known = false
		}
	}
	if known {
		p.Total = &total
		pct := 100.0
		if total > 0 {
			pct = math.Round(float64(p.Done)*1000/float64(total)) / 10
		}
		p.Percent = &pct
	}

	// The rate and the time left, only where they can be told.
	if rate, ok := m.Rate(now); ok && t.Status == ledger.Running && shown == string(ledger.Running) {
		r := math.Round(rate*100) / 100
		p.RatePerS = &r
		if known {
			eta := math.Round(float64(max(total-p.Done, 0)) / rate)
			p.EtaS = &eta
		}
	}

	names := make([]string, 0, len(t.Counters))
	for n := range t.Counters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names[:min(len(names), progressCounters)] {
		label := n
		if m != nil && m.Labels[n] != "" {
			label = m.Labels[n]
		}
		p.Counters = append(p.Counters, api.Counter{Name: n, Label: label, Value: t.Counters[n]})
	}

	p.Notes = noteGroups(m, t.Notes, notes)

	pending := 0
	for _, a := range approvals {
		if a.State != ledger.ApprovalPending {
			continue
		}
		pending++
		if len(p.Waiting.Pending) < progressPending {
			p.Waiting.Pending = append(p.Waiting.Pending, api.PendingApproval{ID: a.ID, Step: a.Step, Item: a.Item, Prompt: a.Prompt, Expires: a.Expires})
		}
	}
	p.Waiting.Approvals = pending
	p.Waiting.Effects = max(t.Waiting-pending, 0)
	if t.Status == ledger.Paused && t.Pause != nil {
		p.Waiting.Paused = t.Pause.String()
	}

	if b := t.Budget; b != nil {
		for _, n := range ledger.BudgetOrder {
			l := b.Limits.Limit(n)
			if l <= 0 {
				continue
			}
			used := t.BudgetUsage(n)
			if n == ledger.BudgetWallTime {
				used = p.ElapsedS
			}
			p.Budget = append(p.Budget, api.BudgetUse{Name: n, Used: used, Limit: l, Percent: math.Round(used*1000/l) / 10})
		}
	}
	return p
}

// noteGroups groups the newest notes by kind: blockers, decisions and
// findings first, then the other kinds by name. Counts come from the
// record (m.Kinds) when it keeps them, else from the newest notes, which
// the group then says. Notes a summary replaced are left out.
func noteGroups(m *ledger.Progress, recorded uint64, newest []ledger.Note) []api.NoteGroup {
	byKind := map[string]*api.NoteGroup{}
	var kinds []string
	group := func(kind string) *api.NoteGroup {
		g := byKind[kind]
		if g == nil {
			g = &api.NoteGroup{Kind: kind, Newest: []api.Note{}}
			byKind[kind] = g
			kinds = append(kinds, kind)
		}
		return g
	}
	counted := m != nil && m.Kinds != nil
	if counted {
		for k, n := range m.Kinds {
			group(k).Count = n
		}
	}
	for _, n := range newest {
		if n.ReplacedBy != 0 {
			continue
		}
		g := group(n.Kind)
		if len(g.Newest) < progressNewest {
			g.Newest = append(g.Newest, wireNote(n))
		}
		if !counted || n.Kind == ledger.NoteSummary {
			g.Count++
		}
	}
	estimated := !counted && recorded > uint64(len(newest))
	rank := func(k string) int {
		if i := slices.Index([]string{ledger.NoteBlocker, ledger.NoteDecision, ledger.NoteFinding}, k); i >= 0 {
			return i
		}
		return 3
	}
	sort.Slice(kinds, func(i, j int) bool {
		if ri, rj := rank(kinds[i]), rank(kinds[j]); ri != rj {
			return ri < rj
		}
		return kinds[i] < kinds[j]
	})
	out := make([]api.NoteGroup, 0, len(kinds))
	for _, k := range kinds {
		g := byKind[k]
		g.More = max(g.Count-int64(len(g.Newest)), 0)
		if estimated {
			g.Estimated, g.Of = true, len(newest)
		}
		out = append(out, *g)
	}
	return out
}

// reportNotes is the notes of a report: the newest api.ReportNotes, oldest
// first.
func reportNotes(r ledger.Reader, t *ledger.Task) ([]ledger.Note, error) {
	notes, err := r.RecentNotes(t, api.ReportNotes, nil)
	slices.Reverse(notes)
	return notes, err
}

// notes answers GET /v1/tasks/{id}/notes?kind=&step=&grep=&from=&limit=:
// a page of the task's notes that match, oldest first, and where the next
// page starts (api.NotesPage).
func (s *Server) notes(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	nq := ledger.NoteQuery{Kind: q.Get("kind"), Step: q.Get("step"), Grep: q.Get("grep")}
	for _, p := range []struct {
		name string
		to   func(uint64)
	}{{"from", func(v uint64) { nq.From = v }}, {"limit", func(v uint64) { nq.Limit = int(min(v, ledger.MaxNotesPage)) }}} {
		if raw := q.Get(p.name); raw != "" {
			v, err := strconv.ParseUint(raw, 10, 64)
			if err != nil {
				s.fail(w, req, badRequest("%s must be a whole number, not %q", p.name, raw))
				return
			}
			p.to(v)
		}
	}
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) (api.NotesPage, error) {
		notes, next, err := r.NotesPage(t.ID, nq)
		return api.NotesPage{Task: t.ID, Notes: wireList(notes, wireNote), Next: next, Total: t.Notes}, err
	})
}
