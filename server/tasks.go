package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/ledger"
)

// view is a task as the owner sees it: a running task that none of its
// workers may work is interrupted (its process is gone).
func (s *Server) view(t *ledger.Task) api.Task {
	v := wireTask(t)
	v.ShownStatus, v.Worked = string(t.Status), s.e.Working(t.ID)
	if t.Status == ledger.Running && !v.Worked {
		v.ShownStatus = api.Interrupted
	}
	return v
}

// find resolves the {id} of a request (an id or a unique prefix) in r.
func find(r ledger.Reader, req *http.Request) (*ledger.Task, error) {
	return r.FindTask(req.PathValue("id"))
}

// answerRead answers a GET about the request's task: fn reads what it
// needs in the same snapshot the task was found in, and its result is the
// answer (a failure, an API error).
func answerRead[T any](s *Server, w http.ResponseWriter, req *http.Request, fn func(ledger.Reader, *ledger.Task) (T, error)) {
	var out T
	err := s.e.Read(func(r ledger.Reader) error {
		t, err := find(r, req)
		if err != nil {
			return err
		}
		out, err = fn(r, t)
		return err
	})
	if err != nil {
		s.fail(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// nonNil makes a nil list an empty one, so it is [] in JSON, not null.
func nonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// findTask resolves the request's task in its own snapshot.
func (s *Server) findTask(req *http.Request) (*ledger.Task, error) {
	var t *ledger.Task
	err := s.e.Read(func(r ledger.Reader) error {
		var err error
		t, err = find(r, req)
		return err
	})
	return t, err
}

func (s *Server) owner(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Owner())
}

func (s *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Versions())
}

func (s *Server) tasks(w http.ResponseWriter, req *http.Request) {
	if wantsFollow(req) {
		s.listStream(w, req)
		return
	}
	q, err := parseTaskQuery(req)
	if err != nil {
		s.fail(w, req, err)
		return
	}
	lq := ledger.TaskQuery{Newest: q.newest, Limit: q.limit}
	if q.status != nil || q.name != "" {
		lq.Match = func(t *ledger.Task) bool { return q.match(s.view(t)) }
	}
	var ts []*ledger.Task
	var total int
	if err := s.e.Read(func(r ledger.Reader) error {
		var err error
		ts, total, err = r.TaskList(lq)
		return err
	}); err != nil {
		s.fail(w, req, err)
		return
	}
	out := make([]api.Task, 0, len(ts))
	for _, t := range ts {
		out = append(out, s.view(t))
	}
	w.Header().Set(api.TotalHeader, strconv.Itoa(total))
	writeJSON(w, http.StatusOK, out)
}

// taskQuery is the filter of GET /v1/tasks: ?status= (shown statuses,
// comma-separated), ?name= (the task's name), ?order=oldest|newest (by
// creation; oldest by default) and ?limit= (0 or absent: all).
type taskQuery struct {
	status map[string]bool
	name   string
	newest bool
	limit  int
}

// shownStatuses are the statuses a task is shown with.
var shownStatuses = []string{string(ledger.Queued), string(ledger.Running), api.Interrupted, string(ledger.WaitingApproval),
	string(ledger.Paused), string(ledger.Succeeded), string(ledger.Failed), string(ledger.Cancelled)}

func parseTaskQuery(req *http.Request) (taskQuery, error) {
	v := req.URL.Query()
	q := taskQuery{name: v.Get("name")}
	for _, st := range strings.Split(v.Get("status"), ",") {
		if st = strings.TrimSpace(st); st == "" {
			continue
		}
		if !slices.Contains(shownStatuses, st) {
			return q, badRequest("status %q: want one of %s", st, strings.Join(shownStatuses, ", "))
		}
		if q.status == nil {
			q.status = map[string]bool{}
		}
		q.status[st] = true
	}
	switch v.Get("order") {
	case "", "oldest":
	case "newest":
		q.newest = true
	default:
		return q, badRequest("order %q: want oldest or newest", v.Get("order"))
	}
	var err error
	q.limit, err = parseLimit(v.Get("limit"))
	return q, err
}

func (q taskQuery) match(t api.Task) bool {
	return (q.status == nil || q.status[t.ShownStatus]) && (q.name == "" || t.Name == q.name)
}

// parseLimit reads a ?limit= that is absent or a count (0: all).
func parseLimit(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("limit %q: want a count, or 0 for all", v)
	}
	return n, nil
}

// parseItem reads a ?item= that is absent (-1) or an item number.
func parseItem(v string) (int, error) {
	if v == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("item %q: want an item number (0, 1, ...)", v)
	}
	return n, nil
}

func (s *Server) report(w http.ResponseWriter, req *http.Request) {
	rep, err := s.readReport(req)
	if err != nil {
		s.fail(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) readReport(req *http.Request) (*api.Report, error) {
	var rep api.Report
	err := s.e.Read(func(r ledger.Reader) error {
		t, err := find(r, req)
		if err != nil {
			return err
		}
		m, err := r.Manifest(t.ID)
		if err != nil {
			return err
		}
		notes, err := reportNotes(r, t) // progress.go
		if err != nil {
			return err
		}
		rep = api.Report{Task: s.view(t), Manifest: summary(m), Notes: wireList(notes, wireNote)}
		rep.ShownStatus = rep.Task.ShownStatus
		rep.Progress, err = ReadProgress(r, t, rep.ShownStatus, time.Now()) // progress.go
		return err
	})
	return &rep, err
}

func summary(m *ledger.Manifest) api.ManifestSummary {
	sum := sha256.Sum256(m.Source)
	s := api.ManifestSummary{
		Objective: m.Objective, Constraints: m.Constraints, Filename: m.Filename,
		Vars: m.Vars, Plugins: wirePluginPins(m.Plugins), EngineVersion: m.EngineVersion, ABI: m.ABI,
		SourceSHA256: hex.EncodeToString(sum[:]),
	}
	for _, p := range m.Policies {
		s.Policies = append(s.Policies, api.PolicySummary{Name: p.Name, Version: p.Version, SHA256: p.SHA256})
	}
	s.Models, s.Prompts, s.ModelReplay = nonNil(wireList(m.Models, wireModelPin)), []api.PromptSummary{}, wireReplayPin(m.ModelReplay)
	for _, p := range m.Prompts {
		s.Prompts = append(s.Prompts, api.PromptSummary{Name: p.Name, Version: p.Version, File: p.File, SHA256: p.SHA256})
	}
	return s
}

// manifest answers GET /v1/tasks/{id}/manifest: the whole run manifest as
// pinned at submit, policy texts included.
func (s *Server) manifest(w http.ResponseWriter, req *http.Request) {
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) (api.Manifest, error) {
		m, err := r.Manifest(t.ID)
		if err != nil {
			return api.Manifest{}, err
		}
		grants := []api.PolicyGrant{}
		for _, g := range engine.ManifestGrants(m) {
			grants = append(grants, api.PolicyGrant{Policy: g.Policy, Step: g.Step, Capability: g.Capability, ByTask: g.ByTask, Granted: g.Granted})
		}
		return api.Manifest{ID: t.ID, Summary: summary(m), Source: string(m.Source),
			Policies: nonNil(wireList(m.Policies, wirePolicyPin)), Prompts: nonNil(wireList(m.Prompts, wirePromptPin)), Grants: grants}, nil
	})
}

func (s *Server) submit(w http.ResponseWriter, req *http.Request) {
	var in api.SubmitRequest
	if err := readJSON(req, &in); err != nil {
		s.fail(w, req, err)
		return
	}
	sub, err := submissionOf(&in, overTCP(req)) // uploads.go
	if err != nil {
		s.fail(w, req, err)
		return
	}
	o := engine.SubmitOptions{
		Vars: in.Vars, IdempotencyKey: in.IdempotencyKey,
		Policies: in.Policies, Without: in.Without, PolicyDirs: in.PolicyDirs, GrantPolicies: in.GrantPolicies,
		ModelReplay: in.ModelReplay,
	}
	var t *ledger.Task
	var created bool
	if sub.bundle != nil {
		t, created, err = s.e.SubmitBundle(req.Context(), *sub.bundle, o)
	} else {
		t, created, err = s.e.Submit(req.Context(), sub.path, o)
	}
	if err != nil {
		if !errors.As(err, new(*engine.InvalidTaskError)) && !isStoreError(err) {
			err = fmt.Errorf("%w: %v", errBadRequest, err) // an unreadable file or plugin
		}
		s.fail(w, req, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, api.SubmitResponse{ID: t.ID, Created: created, Status: api.Status(t.Status), Task: s.view(t)})
}

// isStoreError tells failures of the store (disk full, failed) from
// failures of the request.
func isStoreError(err error) bool {
	return errors.Is(err, ledger.ErrNoSpace) || errors.Is(err, ledger.ErrStoreFailed) || errors.Is(err, ledger.ErrReadOnly)
}

func (s *Server) cancel(w http.ResponseWriter, req *http.Request) {
	var in api.CancelRequest
	if err := readJSON(req, &in); err != nil {
		s.fail(w, req, err)
		return
	}
	t, err := s.findTask(req)
	if err == nil {
		t, err = s.e.Cancel(req.Context(), t.ID, in.Reason)
	}
	if err != nil {
		s.fail(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(t))
}

func (s *Server) resume(w http.ResponseWriter, req *http.Request) {
	var in api.ResumeRequest
	if err := readJSON(req, &in); err != nil {
		s.fail(w, req, err)
		return
	}
	t, err := s.findTask(req)
	if err != nil {
		s.fail(w, req, err)
		return
	}
	if t.Status.Terminal() {
		hint := ""
		if t.Status != ledger.Succeeded {
			hint = fmt.Sprintf("; to run it again from where it stopped: lhengine retry %s", t.ID)
		}
		s.fail(w, req, fmt.Errorf("%w: task %s is %s; nothing to resume%s%s", errConflict, t.ID, t.Status, reasonSuffix(t), hint))
		return
	}
	if err := s.e.CheckPlugins(t.ID); err != nil {
		s.fail(w, req, fmt.Errorf("%w: cannot resume task %s: %v\na task submitted before modules were kept in the store runs from its plugin files: restore the file(s) it was submitted with and resume again", errConflict, t.ID, err))
		return
	}
	if len(in.Budget) > 0 {
		if t, err = s.e.RaiseBudgets(req.Context(), t.ID, in.Budget, s.who(req, in.By)); err != nil {
			var bad *engine.BudgetRaiseError
			if errors.As(err, &bad) {
				err = badRequest("%v", err)
			} else if errors.Is(err, ledger.ErrBudgetReached) {
				err = fmt.Errorf("%w: %v", errConflict, err)
			}
			s.fail(w, req, err)
			return
		}
	}
	if by := s.who(req, in.By); t.Status == ledger.Paused || by != "" {
		if t, err = s.e.ResumeAs(req.Context(), t.ID, by, in.Where); err != nil {
			if errors.Is(err, ledger.ErrBudgetReached) {
				err = fmt.Errorf("%w: %v", errConflict, err)
			}
			s.fail(w, req, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, s.view(t))
}

// pauseGrace is the grace of a pause that names none.
const pauseGrace = 30 * time.Second

func (s *Server) pause(w http.ResponseWriter, req *http.Request) {
	var in api.PauseRequest
	if err := readJSON(req, &in); err != nil {
		s.fail(w, req, err)
		return
	}
	grace := pauseGrace
	if in.Grace != "" {
		d, err := time.ParseDuration(in.Grace)
		if err != nil || d < 0 {
			s.fail(w, req, badRequest("grace %q: want a duration such as 30s or 0s", in.Grace))
			return
		}
		grace = d
	}
	t, err := s.findTask(req)
	if err == nil {
		why := ledger.PauseReason{Kind: ledger.PauseOperator, By: s.who(req, in.By), Note: in.Reason}
		t, err = s.e.Pause(req.Context(), t.ID, why, grace)
	}
	if err != nil {
		s.fail(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(t))
}

func reasonSuffix(t *ledger.Task) string {
	if t.Reason == "" {
		return ""
	}
	return " (" + t.Reason + ")"
}

func (s *Server) retry(w http.ResponseWriter, req *http.Request) {
	var in api.RetryRequest
	if err := readJSON(req, &in); err != nil {
		s.fail(w, req, err)
		return
	}
	t, err := s.findTask(req)
	if err == nil {
		if in.From != "" && t.StepIndex(in.From) < 0 {
			err = badRequest("task %s has no step %q", t.ID, in.From)
		} else {
			t, err = s.e.Retry(req.Context(), t.ID, in.From, s.who(req, in.By))
		}
	}
	if err != nil {
		s.fail(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(t))
}

func (s *Server) remove(w http.ResponseWriter, req *http.Request) {
	t, err := s.findTask(req)
	if err == nil {
		err = s.e.Remove(req.Context(), t.ID)
	}
	if err != nil {
		var nf *engine.NotFinishedError
		if errors.As(err, &nf) {
			if s.view(t).ShownStatus == api.Interrupted {
				// Say what status and ls say: no process works on it.
				err = fmt.Errorf("task %s is interrupted (no process is working on it), not finished: only succeeded, failed or cancelled tasks can be removed (cancel it first: lhengine cancel %s; or finish it: lhengine resume %s)", t.ID, t.ID, t.ID)
			}
			err = fmt.Errorf("%w: %v", errConflict, err)
		}
		s.fail(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RemoveResult{ID: t.ID})
}

// steps returns the indexes of the task's steps the ?step= query names
// (all when it is absent).
func steps(t *ledger.Task, req *http.Request) ([]int, error) {
	name := req.URL.Query().Get("step")
	var out []int
	for i, st := range t.Steps {
		if name == "" || st.Name == name {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("task %s has no step %q: %w", t.ID, name, ledger.ErrNotFound)
	}
	return out, nil
}

func (s *Server) outputs(w http.ResponseWriter, req *http.Request) {
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) (map[string]json.RawMessage, error) {
		idx, err := steps(t, req)
		if err != nil {
			return nil, err
		}
		outs := map[string]json.RawMessage{}
		for _, i := range idx {
			out, err := r.StepOutputOf(t, i)
			if errors.Is(err, ledger.ErrNotFound) {
				continue // not completed in its current pass
			}
			if err != nil {
				return nil, err
			}
			outs[t.Steps[i].Name] = out
		}
		return outs, nil
	})
}

// attempts answers GET /v1/tasks/{id}/attempts: ?step= one step's,
// ?item= one item's (with step), ?limit= the first N (the header
// X-Total-Count says how many match).
func (s *Server) attempts(w http.ResponseWriter, req *http.Request) {
	v := req.URL.Query()
	item, err := parseItem(v.Get("item"))
	if err == nil && item >= 0 && v.Get("step") == "" {
		err = badRequest("item needs step: the item numbers are a step's")
	}
	limit, lerr := parseLimit(v.Get("limit"))
	if err = errors.Join(err, lerr); err != nil {
		s.fail(w, req, err)
		return
	}
	total := 0
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) ([]*api.Attempt, error) {
		idx, err := steps(t, req)
		if err != nil {
			return nil, err
		}
		all := []*api.Attempt{}
		for _, i := range idx {
			want := -1 // all
			if limit > 0 {
				want = max(limit-len(all), 0) // 0: count only
			}
			as, n, err := r.AttemptsPage(t.ID, i, item, want)
			if err != nil {
				return nil, err
			}
			all = append(all, wireList(as, wireAttempt)...)
			total += n
		}
		w.Header().Set(api.TotalHeader, strconv.Itoa(total))
		return all, nil
	})
}

func (s *Server) artifacts(w http.ResponseWriter, req *http.Request) {
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) ([]api.Provenance, error) {
		ps, err := r.Artifacts(t.ID)
		return nonNil(wireList(ps, wireProvenance)), err
	})
}

// artifact streams an artifact's bytes, a chunk at a time.
func (s *Server) artifact(w http.ResponseWriter, req *http.Request) {
	ref := req.PathValue("ref")
	buf := make([]byte, ledger.ArtifactChunk)
	n, size, err := s.e.ReadArtifact(ref, 0, buf)
	if err != nil {
		s.fail(w, req, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.Header().Set("Content-Disposition", "attachment")
	w.WriteHeader(http.StatusOK)
	for off := int64(0); n > 0; {
		if _, err := w.Write(buf[:n]); err != nil {
			return // the client went away
		}
		off += int64(n)
		if n, _, err = s.e.ReadArtifact(ref, off, buf); err != nil {
			// Headers are sent: cut the body short so the client sees
			// fewer bytes than Content-Length, never wrong ones.
			s.o.Logger.Error("artifact read failed mid-stream", "ref", ref, "offset", off, "error", err)
			panic(http.ErrAbortHandler)
		}
	}
}

func (s *Server) effects(w http.ResponseWriter, req *http.Request) {
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) ([]api.Effect, error) {
		es, err := r.Effects(t.ID)
		return nonNil(wireList(es, wireEffect)), err
	})
}

func (s *Server) failures(w http.ResponseWriter, req *http.Request) {
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) ([]api.FailedItem, error) {
		fs, err := r.FailedItems(t.ID)
		return wireList(fs, wireFailedItem), err
	})
}

func (s *Server) settle(confirmed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var in api.SettleRequest
		if err := readJSON(req, &in); err != nil {
			s.fail(w, req, err)
			return
		}
		eff, err := s.settleEffect(req, confirmed, in)
		if err != nil {
			s.fail(w, req, err)
			return
		}
		writeJSON(w, http.StatusOK, wireEffect(*eff))
	}
}

func (s *Server) settleEffect(req *http.Request, confirmed bool, in api.SettleRequest) (*ledger.Effect, error) {
	t, err := s.findTask(req)
	if err != nil {
		return nil, err
	}
	step := t.StepIndex(in.Step)
	if step < 0 {
		return nil, badRequest("task %s has no step %q", t.ID, in.Step)
	}
	return s.e.ResolveEffect(req.Context(), t.ID, step, in.Item, in.Key, confirmed, in.Note)
}

func (s *Server) gc(w http.ResponseWriter, req *http.Request) {
	var in api.GCRequest
	if err := readJSON(req, &in); err != nil {
		s.fail(w, req, err)
		return
	}
	o := engine.GCOptions{Workspaces: in.Workspaces}
	if in.OlderThan != "" {
		d, err := time.ParseDuration(in.OlderThan)
		if err != nil || d < 0 {
			s.fail(w, req, badRequest("older_than %q: want a duration that is not negative, such as 72h", in.OlderThan))
			return
		}
		o.OlderThan = d
	}
	rep, err := s.e.GC(req.Context(), o)
	if err != nil {
		s.fail(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, wireGC(&rep))
}

func (s *Server) reclaim(w http.ResponseWriter, req *http.Request) {
	n, err := s.e.ReclaimSpace(req.Context())
	if err != nil {
		s.fail(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"files": n})
}

// eventPage answers GET /v1/tasks/{id}/events (not followed): the events
// from sequence number from on whose type is one of ?type= (comma-separated;
// all when absent) and whose time is not before ?since= (RFC 3339), the
// first ?limit= of them (0 or absent: all). The header X-Total-Count says
// how many match.
func (s *Server) eventPage(w http.ResponseWriter, req *http.Request, from uint64) {
	v := req.URL.Query()
	var types map[ledger.EventType]bool
	for _, ty := range strings.Split(v.Get("type"), ",") {
		if ty = strings.TrimSpace(ty); ty == "" {
			continue
		}
		if strings.Trim(ty, "abcdefghijklmnopqrstuvwxyz_") != "" {
			s.fail(w, req, badRequest("type %q: want event types such as unit_failed, comma-separated", ty))
			return
		}
		if types == nil {
			types = map[ledger.EventType]bool{}
		}
		types[ledger.EventType(ty)] = true
	}
	var since time.Time
	if sv := v.Get("since"); sv != "" {
		var err error
		if since, err = time.Parse(time.RFC3339Nano, sv); err != nil {
			s.fail(w, req, badRequest("since %q: want an RFC 3339 time such as 2026-03-04T12:00:00Z", sv))
			return
		}
	}
	limit, err := parseLimit(v.Get("limit"))
	if err != nil {
		s.fail(w, req, err)
		return
	}
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) ([]api.Event, error) {
		out := []api.Event{}
		total := 0
		err := r.EachEvent(t.ID, from, func(e *ledger.Event) bool {
			if (types == nil || types[e.Type]) && !e.Time.Before(since) {
				total++
				if limit == 0 || len(out) < limit {
					out = append(out, wireEvent(*e))
				}
			}
			return true
		})
		w.Header().Set(api.TotalHeader, strconv.Itoa(total))
		return out, err
	})
}
