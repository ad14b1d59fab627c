package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/ledger"
)

// The task list: GET / with its filters in the query, so that a filtered
// list is a link to keep and works without a script (the filter form is
// a plain GET form):
//
//	?status=S   shown status (queued, running, interrupted, waiting_approval,
//	            paused, succeeded, failed, cancelled); repeated or
//	            comma-separated for several
//	?name=TEXT  tasks whose name contains TEXT, in any case
//	?id=PREFIX  tasks whose id starts with PREFIX, in any case
//	?order=     newest (the default, as lhengine ls) or oldest, by submission
//	?page=N     the Nth page of listPage tasks (from 1)

// listPage is how many tasks one page of the task list shows.
const listPage = 50

// listQuery is the task list's filter, read from the page's query.
type listQuery struct {
	Status []string // shown statuses; none: any
	Name   string
	ID     string
	Oldest bool
	Page   int // from 1
}

func parseListQuery(v url.Values) (listQuery, error) {
	q := listQuery{Name: strings.TrimSpace(v.Get("name")), ID: strings.ToUpper(strings.TrimSpace(v.Get("id"))), Page: 1}
	for _, s := range v["status"] {
		for _, st := range strings.Split(s, ",") {
			if st = strings.TrimSpace(st); st == "" || slices.Contains(q.Status, st) {
				continue
			}
			if !slices.Contains(shownStatuses, st) { // tasks.go: the statuses of GET /v1/tasks?status=
				return q, fmt.Errorf("status %q: want one of %s", st, strings.Join(shownStatuses, ", "))
			}
			q.Status = append(q.Status, st)
		}
	}
	switch o := v.Get("order"); o {
	case "", "newest":
	case "oldest":
		q.Oldest = true
	default:
		return q, fmt.Errorf("order %q: want newest or oldest", o)
	}
	if p := v.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return q, fmt.Errorf("page %q: want a page number (1, 2, ...)", p)
		}
		q.Page = n
	}
	return q, nil
}

// match reports whether the task list shows t under q.
func (q listQuery) match(t *api.Task) bool {
	return (len(q.Status) == 0 || slices.Contains(q.Status, t.ShownStatus)) &&
		(q.Name == "" || strings.Contains(strings.ToLower(t.Name), strings.ToLower(q.Name))) &&
		strings.HasPrefix(t.ID, q.ID)
}

// Filtered: the query keeps some tasks out.
func (q listQuery) Filtered() bool { return len(q.Status) > 0 || q.Name != "" || q.ID != "" }

// Only reports whether the query keeps the tasks shown with status st
// and no others.
func (q listQuery) Only(st string) bool { return len(q.Status) == 1 && q.Status[0] == st }

// Statuses is the query's statuses when it has several ("failed,paused",
// an option of the filter of its own), "" otherwise.
func (q listQuery) Statuses() string {
	if len(q.Status) < 2 {
		return ""
	}
	return strings.Join(q.Status, ",")
}

// URL is the list under q, on page page.
func (q listQuery) URL(page int) string {
	v := url.Values{}
	if len(q.Status) > 0 {
		v.Set("status", strings.Join(q.Status, ","))
	}
	if q.Name != "" {
		v.Set("name", q.Name)
	}
	if q.ID != "" {
		v.Set("id", q.ID)
	}
	if q.Oldest {
		v.Set("order", "oldest")
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// listRow is one task of the task list.
type listRow struct {
	api.Task
	Done, Total int
	Current     string
	// Duration is how long it ran: from its start to its end, or to now
	// while it has not finished; "" before it started.
	Duration string
	// Why is why it failed, was cancelled or paused ("" otherwise), and
	// WhyShort the same cut to a table cell.
	Why, WhyShort string
}

func row(t api.Task, now time.Time) listRow {
	done, total := t.Progress()
	r := listRow{Task: t, Done: done, Total: total, Current: currentStep(&t)}
	if !t.StartedAt.IsZero() {
		end := now
		if !t.FinishedAt.IsZero() {
			end = t.FinishedAt
		}
		r.Duration = span(end.Sub(t.StartedAt))
	}
	if t.Status == api.Failed || t.Status == api.Cancelled || t.Status == api.Paused || t.ShownStatus == api.Interrupted {
		r.Why = t.Reason
		if t.Failure != nil && t.Failure.String() != t.Reason {
			r.Why = strings.TrimSpace(t.Reason + " (" + t.Failure.String() + ")")
		}
		if t.ShownStatus == api.Interrupted && r.Why == "" {
			r.Why = "no process works on it: lhengine resume " + t.ID
		}
		r.WhyShort = clip(r.Why, 140)
	}
	return r
}

// currentStep names the step a task is at, "" once it finished.
func currentStep(t *api.Task) string {
	if t.Status == api.Succeeded || t.Cursor < 0 || t.Cursor >= len(t.Steps) {
		return ""
	}
	return t.Steps[t.Cursor].Name
}

// listView is what the task list page shows.
type listView struct {
	Query listQuery
	Rows  []listRow
	// Statuses are the statuses the filter offers.
	Statuses []string
	// Total is how many tasks match the filter, All how many there are;
	// First and Last number the rows shown (from 1).
	Total, All, First, Last int
	// Prev and Next link to the neighbouring pages ("" for none).
	Prev, Next  string
	Page, Pages int
	// Names are the names of the tasks, for the name field's suggestions.
	Names []string
	// Pending are the approvals waiting for a person, of every task that
	// has not finished.
	Pending []approvalView
}

func (s *Server) pageList(w http.ResponseWriter, r *http.Request) {
	q, err := parseListQuery(r.URL.Query())
	if err != nil {
		s.pageError(w, http.StatusBadRequest, "This list cannot be shown: "+err.Error()+".", "/")
		return
	}
	ts, err := s.taskList()
	var pend []ledger.Approval
	if err == nil {
		err = s.e.Read(func(rd ledger.Reader) error {
			var err error
			pend, err = pending(rd)
			return err
		})
	}
	if err != nil {
		s.pageError(w, toAPIError(err).HTTPStatus, err.Error(), "")
		return
	}
	v := listView{Query: q, Statuses: shownStatuses, All: len(ts)}
	names := make(map[string]string, len(ts))
	var match []api.Task
	for _, t := range ts {
		names[t.ID] = t.Name
		if !slices.Contains(v.Names, t.Name) {
			v.Names = append(v.Names, t.Name)
		}
		if q.match(&t) {
			match = append(match, t)
		}
	}
	slices.Sort(v.Names)
	if !q.Oldest {
		slices.Reverse(match) // taskList is oldest first
	}
	v.Total = len(match)
	v.Pages = max(1, (v.Total+listPage-1)/listPage)
	v.Page = min(q.Page, v.Pages)
	from := (v.Page - 1) * listPage
	now := time.Now()
	for _, t := range match[from:min(from+listPage, len(match))] {
		v.Rows = append(v.Rows, row(t, now))
	}
	if len(v.Rows) > 0 {
		v.First, v.Last = from+1, from+len(v.Rows)
	}
	if v.Page > 1 {
		v.Prev = q.URL(v.Page - 1)
	}
	if v.Page < v.Pages {
		v.Next = q.URL(v.Page + 1)
	}
	for _, a := range pend {
		av := viewApproval(a, names[a.Task])
		av.Back = "/"
		v.Pending = append(v.Pending, av)
	}
	s.render(w, r, http.StatusOK, "list", s.page("Tasks", v))
}

// span writes a duration for a person: "850ms", "42s", "3m05s", "2h04m",
// "3d04h".
func span(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}
