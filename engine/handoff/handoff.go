// Package handoff builds a task's handoff: the bundle a fresh model
// context (a new agent session, a new worker, a person coming back) is
// built from, read from the task's durable records only. It is what
// `lhengine handoff ID` prints, GET /v1/tasks/{id}/handoff answers and a
// plugin's handoff.get returns (specs/abi.md).
//
// The objective, the constraints and every decision are carried verbatim
// and whole: they are what a summary must never lose. Everything that
// grows with the task (units, findings, artifacts) is counted in full and
// listed only in part, newest or first, with the count of the rest, so a
// handoff stays small whatever the task's size.
package handoff

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lhengine/lhengine/ledger"
)

// Caps of the lists that grow with a task.
const (
	maxEvidence  = 10 // committed units named per completed step
	maxFindings  = 10 // newest findings
	maxBlockers  = 20 // newest blockers
	maxArtifacts = 50 // newest artifacts
)

// Bundle is a task's handoff.
type Bundle struct {
	Task        TaskRef  `json:"task"`
	Objective   string   `json:"objective"`
	Constraints []string `json:"constraints"`
	// Checkpoint is where the task stands: the step under the cursor, its
	// pass, and the last event recorded.
	Checkpoint Checkpoint `json:"checkpoint"`
	// Completed are the steps done in their current pass, in order, with
	// the evidence of their commits; Pending the ones still to run
	// (the one under the cursor first).
	Completed []CompletedStep `json:"completed_steps"`
	Pending   []PendingStep   `json:"pending_steps"`
	// Decisions are every decision note, oldest first, verbatim: never cut.
	Decisions []ledger.Note `json:"decisions"`
	// Blockers are the newest blockers; BlockersTotal counts them all.
	Blockers      []ledger.Note `json:"blockers"`
	BlockersTotal int           `json:"blockers_total"`
	Findings      Findings      `json:"findings"`
	// Artifacts are the newest artifacts; ArtifactsTotal counts them all.
	Artifacts      []Artifact `json:"artifacts"`
	ArtifactsTotal int        `json:"artifacts_total"`
	// Environment is the facts as last read, and the last drift.
	Environment *Environment `json:"environment,omitempty"`
	// Waiting is what waits for a person.
	Waiting Waiting `json:"waiting"`
	// NextActions are the valid next actions, as commands.
	NextActions []string `json:"next_actions"`
	// Built is when the bundle was read.
	Built time.Time `json:"built"`
}

// TaskRef names the task and its state.
type TaskRef struct {
	ID     string        `json:"id"`
	Name   string        `json:"name"`
	Status ledger.Status `json:"status"`
	Reason string        `json:"reason,omitempty"`
}

// Checkpoint is where a task stands.
type Checkpoint struct {
	Step      string    `json:"step"`
	StepIndex int       `json:"step_index"`
	Pass      int       `json:"pass"`
	Done      int       `json:"done"`
	Total     int       `json:"total"`
	Repairs   int       `json:"repairs"`
	Epoch     uint64    `json:"epoch"`
	LastEvent uint64    `json:"last_event"`
	Updated   time.Time `json:"updated"`
}

// CompletedStep is a step done in its current pass.
type CompletedStep struct {
	Name  string `json:"name"`
	Pass  int    `json:"pass"`
	Units int    `json:"units"`
	// Failed counts the items its allow_failures tolerated.
	Failed int `json:"failed,omitempty"`
	// Evidence names the first committed units: which attempt committed
	// each, by whom, when. EvidenceTotal counts them all.
	Evidence      []Evidence `json:"evidence"`
	EvidenceTotal int        `json:"evidence_total"`
}

// Evidence is one committed unit.
type Evidence struct {
	Item      int       `json:"item"`
	Attempt   int       `json:"attempt"`
	Owner     string    `json:"owner"`
	Committed time.Time `json:"committed"`
}

// PendingStep is a step still to run (or running) in the task's current
// pass.
type PendingStep struct {
	Name    string `json:"name"`
	Planned bool   `json:"planned"`
	Units   int    `json:"units,omitempty"`
	Done    int    `json:"done,omitempty"`
	Leased  int    `json:"leased,omitempty"`
	Waiting int    `json:"waiting,omitempty"`
	Failed  int    `json:"failed,omitempty"`
}

// Findings summarises the findings: how many were recorded, the task's
// counters, and the newest few of what stands for them now (findings no
// summary replaced, and summaries: a compaction step's notes, each listing
// the notes it replaced).
type Findings struct {
	Total     int              `json:"total"`
	Summaries int              `json:"summaries,omitempty"`
	Counters  map[string]int64 `json:"counters,omitempty"`
	Recent    []ledger.Note    `json:"recent"`
}

// Artifact is one artifact the task stored.
type Artifact struct {
	Ref  string `json:"ref"`
	Name string `json:"name"`
	Step string `json:"step"`
	Item int    `json:"item"`
	Size int64  `json:"size"`
}

// Environment is the task's facts as last read.
type Environment struct {
	Facts map[string]string  `json:"facts"`
	Read  time.Time          `json:"read"`
	Drift *ledger.FactChange `json:"drift,omitempty"`
}

// Waiting is what waits for a person.
type Waiting struct {
	Approvals []ledger.Approval `json:"approvals"`
	// Effects are the reasons of units waiting for an effect to be settled.
	Effects []string            `json:"effects"`
	Pause   *ledger.PauseReason `json:"pause,omitempty"`
}

// Build reads task id's handoff in one snapshot of the store.
func Build(r ledger.Reader, id string, now time.Time) (*Bundle, error) {
	t, err := r.Task(id)
	if err != nil {
		return nil, err
	}
	m, err := r.Manifest(t.ID)
	if err != nil {
		return nil, err
	}
	b := &Bundle{
		Task:        TaskRef{ID: t.ID, Name: t.Name, Status: t.Status, Reason: t.Reason},
		Objective:   m.Objective,
		Constraints: nonNil(m.Constraints),
		Built:       now,
	}
	done, total := t.Progress()
	cur := min(t.Cursor, len(t.Steps)-1)
	b.Checkpoint = Checkpoint{Step: t.Steps[cur].Name, StepIndex: cur, Pass: t.Steps[cur].Pass, Done: done, Total: total,
		Repairs: t.Repairs, Epoch: t.Epoch, LastEvent: max(t.NextEvent, 1) - 1, Updated: t.UpdatedAt}
	if err := b.steps(r, t); err != nil {
		return nil, err
	}
	if err := b.notes(r, t); err != nil {
		return nil, err
	}
	arts, err := r.Artifacts(t.ID)
	if err != nil {
		return nil, err
	}
	b.ArtifactsTotal = len(arts)
	slices.SortStableFunc(arts, func(a, c ledger.Provenance) int { return c.Time.Compare(a.Time) })
	b.Artifacts = []Artifact{}
	for _, a := range arts[:min(len(arts), maxArtifacts)] {
		b.Artifacts = append(b.Artifacts, Artifact{Ref: a.Ref, Name: a.Name, Step: a.Step, Item: a.Item, Size: a.Size})
	}
	facts, err := r.Facts(t.ID)
	if err != nil {
		return nil, err
	}
	if facts != nil {
		b.Environment = &Environment{Facts: facts.Values, Read: facts.Read, Drift: t.Drift}
	}
	if err := b.waiting(r, t); err != nil {
		return nil, err
	}
	b.NextActions = nextActions(t, b.Waiting)
	return b, nil
}

// steps fills Completed and Pending.
func (b *Bundle) steps(r ledger.Reader, t *ledger.Task) error {
	b.Completed, b.Pending = []CompletedStep{}, []PendingStep{}
	for i, st := range t.Steps {
		complete := t.Status == ledger.Succeeded || i < t.Cursor
		if !complete {
			b.Pending = append(b.Pending, PendingStep{Name: st.Name, Planned: st.Planned && i == t.Cursor,
				Units: st.Units, Done: st.Done, Leased: st.Leased, Waiting: st.Waiting, Failed: st.Failed})
			continue
		}
		c := CompletedStep{Name: st.Name, Pass: st.Pass, Units: st.Units, Failed: st.Failed, EvidenceTotal: st.Done, Evidence: []Evidence{}}
		units, err := r.UnitsUpTo(t.ID, i, maxEvidence+st.Failed)
		if err != nil {
			return err
		}
		for _, u := range units {
			if u.State != ledger.UnitDone || u.Pass != st.Pass || len(c.Evidence) == maxEvidence {
				continue
			}
			a, err := r.Attempt(t.ID, i, u.Item, u.Committed)
			if err != nil {
				return fmt.Errorf("step %s item %d: the committed attempt %d: %w", st.Name, u.Item, u.Committed, err)
			}
			c.Evidence = append(c.Evidence, Evidence{Item: u.Item, Attempt: a.Attempt, Owner: a.Owner, Committed: a.Finished})
		}
		b.Completed = append(b.Completed, c)
	}
	return nil
}

// notes fills Decisions (all), Blockers and Findings.
func (b *Bundle) notes(r ledger.Reader, t *ledger.Task) error {
	notes, err := r.Notes(t.ID)
	if err != nil {
		return err
	}
	b.Decisions, b.Blockers = []ledger.Note{}, []ledger.Note{}
	b.Findings = Findings{Counters: t.Counters, Recent: []ledger.Note{}}
	var findings []ledger.Note
	for _, n := range notes {
		switch n.Kind {
		case "decision":
			b.Decisions = append(b.Decisions, n)
		case "blocker":
			b.Blockers = append(b.Blockers, n)
		case "finding", "summary":
			if n.Kind == "finding" {
				b.Findings.Total++
			} else {
				b.Findings.Summaries++
			}
			if n.ReplacedBy == 0 {
				findings = append(findings, n)
			}
		}
	}
	b.BlockersTotal = len(b.Blockers)
	b.Blockers = b.Blockers[max(0, len(b.Blockers)-maxBlockers):]
	b.Findings.Recent = append(b.Findings.Recent, findings[max(0, len(findings)-maxFindings):]...)
	return nil
}

// waiting fills Waiting: pending approvals, units waiting on effects, the
// pause.
func (b *Bundle) waiting(r ledger.Reader, t *ledger.Task) error {
	b.Waiting = Waiting{Approvals: []ledger.Approval{}, Effects: []string{}, Pause: t.Pause}
	if t.NextApproval > 0 {
		as, err := r.Approvals(t.ID)
		if err != nil {
			return err
		}
		for _, a := range as {
			if a.State == ledger.ApprovalPending {
				b.Waiting.Approvals = append(b.Waiting.Approvals, a)
			}
		}
	}
	if t.Waiting > len(b.Waiting.Approvals) && t.Cursor < len(t.Steps) {
		units, err := r.Units(t.ID, t.Cursor)
		if err != nil {
			return err
		}
		for _, u := range units {
			if u.State == ledger.UnitWaiting && u.Effect != "" {
				b.Waiting.Effects = append(b.Waiting.Effects, u.WaitReason)
			}
		}
	}
	return nil
}

// nextActions are the commands a person (or an agent with the CLI) may
// take next, given the task's status.
func nextActions(t *ledger.Task, w Waiting) []string {
	id := t.ID
	var out []string
	for _, a := range w.Approvals {
		out = append(out, fmt.Sprintf("lhengine approve %s %s --note TEXT  # or reject: %s", id, a.ID, a.Prompt))
	}
	for _, e := range w.Effects {
		if i := strings.Index(e, "`lhengine effect confirm"); i >= 0 {
			if j := strings.Index(e[i+1:], "`"); j >= 0 {
				out = append(out, e[i+1:i+1+j]+"  # or effect retry")
			}
		}
	}
	switch t.Status {
	case ledger.Queued, ledger.Running:
		out = append(out, "lhengine events "+id+" --follow", "lhengine pause "+id+" --reason TEXT")
	case ledger.WaitingApproval:
		out = append(out, "lhengine resume "+id+"  # once decided, when no process works the home")
	case ledger.Paused:
		if p := t.Pause; p != nil && p.Kind == ledger.PauseBudget {
			out = append(out, fmt.Sprintf("lhengine resume %s --budget %s=+N", id, p.Name))
		} else {
			out = append(out, "lhengine resume "+id)
		}
	case ledger.Failed, ledger.Cancelled:
		out = append(out, "lhengine retry "+id, "lhengine retry "+id+" --from STEP")
	case ledger.Succeeded:
		out = append(out, "lhengine outputs "+id, "lhengine artifacts "+id)
		if t.Steps != nil {
			for _, st := range t.Steps {
				if st.Failed > 0 {
					out = append(out, "lhengine failures "+id, "lhengine retry "+id)
					break
				}
			}
		}
	}
	if t.Status != ledger.Succeeded && t.Status != ledger.Failed && t.Status != ledger.Cancelled {
		out = append(out, "lhengine cancel "+id)
	}
	return out
}

func nonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}
