package server

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine/handoff"
	"github.com/lhengine/lhengine/ledger"
)

// approvalsOf answers GET /v1/tasks/{id}/approvals: every approval of
// the task, oldest first.
func (s *Server) approvalsOf(w http.ResponseWriter, req *http.Request) {
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) ([]api.Approval, error) {
		as, err := r.Approvals(t.ID)
		return nonNil(wireList(as, wireApproval)), err
	})
}

// pendingApprovals answers GET /v1/approvals: the pending approvals of
// every task that has not finished, oldest task first.
func (s *Server) pendingApprovals(w http.ResponseWriter, req *http.Request) {
	var out []ledger.Approval
	err := s.e.Read(func(r ledger.Reader) error {
		var err error
		out, err = pending(r)
		return err
	})
	if err != nil {
		s.fail(w, req, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(wireList(out, wireApproval)))
}

// pending lists the pending approvals of the tasks that have not finished
// (only those that have asked for one are read whole).
func pending(r ledger.Reader) ([]ledger.Approval, error) {
	ts, _, err := r.TaskList(ledger.TaskQuery{Match: func(t *ledger.Task) bool {
		return t.NextApproval > 0 && !t.Status.Terminal()
	}})
	if err != nil {
		return nil, err
	}
	var out []ledger.Approval
	for _, t := range ts {
		as, err := r.Approvals(t.ID)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			if a.State == ledger.ApprovalPending {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// decide answers POST /v1/tasks/{id}/approvals/{approval}/approve and
// .../reject.
func (s *Server) decide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var in api.DecideRequest
		if err := readJSON(req, &in); err != nil {
			s.fail(w, req, err)
			return
		}
		a, err := s.decideApproval(req, approve, in)
		if err != nil {
			s.fail(w, req, err)
			return
		}
		writeJSON(w, http.StatusOK, a)
	}
}

func (s *Server) decideApproval(req *http.Request, approve bool, in api.DecideRequest) (*api.Decided, error) {
	t, err := s.findTask(req)
	if err != nil {
		return nil, err
	}
	by := s.who(req, in.By)
	a, task, err := s.e.Decide(req.Context(), t.ID, req.PathValue("approval"), approve, by, in.Note)
	if errors.Is(err, ledger.ErrApprovalClosed) {
		err = fmt.Errorf("%w: %v", errConflict, err)
	}
	if err != nil {
		return nil, err
	}
	return &api.Decided{Approval: wireApproval(*a), Task: s.view(task)}, nil
}

// partialOutputs answers GET /v1/tasks/{id}/steps/{step}/committed: the
// outputs of the units of a step committed so far in its current pass,
// whether or not the step has completed (?limit=N, default 100, at most
// 1,000).
func (s *Server) partialOutputs(w http.ResponseWriter, req *http.Request) {
	limit := 100
	if v := req.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.fail(w, req, badRequest("limit %q: want a count, or 0 for all", v))
			return
		}
		limit = n
	}
	item, err := parseItem(req.URL.Query().Get("item")) // tasks.go
	if err != nil {
		s.fail(w, req, err)
		return
	}
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) (*api.Committed, error) {
		i := t.StepIndex(req.PathValue("step"))
		if i < 0 {
			return nil, fmt.Errorf("%w: task %s has no step %q", ledger.ErrNotFound, t.ID, req.PathValue("step"))
		}
		st := t.Steps[i]
		if item >= 0 {
			it, err := r.CommittedItem(t, i, item)
			if err != nil {
				return nil, err
			}
			return &api.Committed{Step: st.Name, Pass: st.Pass, Committed: st.Done, Units: st.Units, Planned: st.Planned, Items: []api.ItemOutput{wireItemOutput(*it)}}, nil
		}
		if limit == 0 {
			limit = math.MaxInt
		}
		items, done, err := r.CommittedOutputs(t, i, limit)
		if err != nil {
			return nil, err
		}
		return &api.Committed{Step: st.Name, Pass: st.Pass, Committed: done, Units: st.Units, Planned: st.Planned, Items: wireList(items, wireItemOutput)}, nil
	})
}

// handoff answers GET /v1/tasks/{id}/handoff: the bundle a fresh context
// resumes the task from (package handoff).
func (s *Server) handoff(w http.ResponseWriter, req *http.Request) {
	answerRead(s, w, req, func(r ledger.Reader, t *ledger.Task) (*api.Handoff, error) {
		b, err := handoff.Build(r, t.ID, s.o.Now())
		if err != nil {
			return nil, err
		}
		return wireHandoff(b), nil
	})
}
