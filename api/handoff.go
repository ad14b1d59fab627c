package api

import "time"

// Handoff is a task's handoff: GET /v1/tasks/{id}/handoff, the bundle a
// fresh model context resumes from (specs/api.md). The objective, the
// constraints and every decision are whole; what grows with the task is
// counted in full and listed in part.
type Handoff struct {
	Task        HandoffTask `json:"task"`
	Objective   string      `json:"objective"`
	Constraints []string    `json:"constraints"`
	// Checkpoint is where the task stands.
	Checkpoint Checkpoint `json:"checkpoint"`
	// Completed are the steps done in their current pass, with the
	// evidence of their commits; Pending the ones still to run.
	Completed []CompletedStep `json:"completed_steps"`
	Pending   []PendingStep   `json:"pending_steps"`
	// Decisions are every decision note, oldest first.
	Decisions []Note `json:"decisions"`
	// Blockers are the newest blockers; BlockersTotal counts them all.
	Blockers      []Note          `json:"blockers"`
	BlockersTotal int             `json:"blockers_total"`
	Findings      HandoffFindings `json:"findings"`
	// Artifacts are the newest artifacts; ArtifactsTotal counts them all.
	Artifacts      []HandoffArtifact `json:"artifacts"`
	ArtifactsTotal int               `json:"artifacts_total"`
	// Environment is the facts as last read, and the last drift.
	Environment *HandoffEnvironment `json:"environment,omitempty"`
	// Waiting is what waits for a person.
	Waiting HandoffWaiting `json:"waiting"`
	// NextActions are the valid next actions, as commands.
	NextActions []string `json:"next_actions"`
	// Built is when the bundle was read.
	Built time.Time `json:"built"`
}

// HandoffTask names the task and its state.
type HandoffTask struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// Checkpoint is where a task stands: the step under the cursor, its pass,
// and the last event recorded.
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
	Name          string     `json:"name"`
	Pass          int        `json:"pass"`
	Units         int        `json:"units"`
	Failed        int        `json:"failed,omitempty"`
	Evidence      []Evidence `json:"evidence"`
	EvidenceTotal int        `json:"evidence_total"`
}

// Evidence is one committed unit of a completed step.
type Evidence struct {
	Item      int       `json:"item"`
	Attempt   int       `json:"attempt"`
	Owner     string    `json:"owner"`
	Committed time.Time `json:"committed"`
}

// PendingStep is a step still to run.
type PendingStep struct {
	Name    string `json:"name"`
	Planned bool   `json:"planned"`
	Units   int    `json:"units,omitempty"`
	Done    int    `json:"done,omitempty"`
	Leased  int    `json:"leased,omitempty"`
	Waiting int    `json:"waiting,omitempty"`
	Failed  int    `json:"failed,omitempty"`
}

// HandoffFindings counts the findings and lists the newest.
type HandoffFindings struct {
	Total     int              `json:"total"`
	Summaries int              `json:"summaries,omitempty"`
	Counters  map[string]int64 `json:"counters,omitempty"`
	Recent    []Note           `json:"recent"`
}

// HandoffArtifact is one artifact of a handoff.
type HandoffArtifact struct {
	Ref  string `json:"ref"`
	Name string `json:"name"`
	Step string `json:"step"`
	Item int    `json:"item"`
	Size int64  `json:"size"`
}

// HandoffEnvironment is the environment facts as last read.
type HandoffEnvironment struct {
	Facts map[string]string `json:"facts"`
	Read  time.Time         `json:"read"`
	Drift *FactChange       `json:"drift,omitempty"`
}

// HandoffWaiting is what waits for a person.
type HandoffWaiting struct {
	Approvals []Approval   `json:"approvals"`
	Effects   []string     `json:"effects"`
	Pause     *PauseReason `json:"pause,omitempty"`
}
