package server

import (
	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/engine/handoff"
	"github.com/lhengine/lhengine/ledger"
)

// The conversions of the store's records into the API's own (api's
// records.go): every answer of the API is built from these, so a record
// the store changes is a compile error here, not a silent change of the
// wire. Plain records convert as Go conversions (their fields must be
// the same, names and types); the others field by field.

func wireTask(t *ledger.Task) api.Task {
	w := api.Task{
		ID: t.ID, Name: t.Name, Status: api.Status(t.Status), Reason: t.Reason,
		Failure: wireFailure(t.Failure), Pause: wirePause(t.Pause), Budget: wireBudget(t.Budget),
		Drift: wireFact(t.Drift), Notify: wireNotify(t.Notify), Meter: wireMeter(t.Meter),
		Cursor: t.Cursor, Steps: wireList(t.Steps, wireStep),
		Epoch: t.Epoch, LeaseOwner: t.LeaseOwner, LeaseUntil: t.LeaseUntil, Leases: t.Leases,
		Attempts: t.Attempts, Failures: t.Failures, ConsecutiveFailures: t.ConsecutiveFailures,
		Reclaims: t.Reclaims, Repairs: t.Repairs, Retries: t.Retries, RepairReason: t.RepairReason,
		Waiting: t.Waiting, NextApproval: t.NextApproval, Output: t.Output,
		Counters: t.Counters, Notes: t.Notes, ModelUsage: wireModelUsage(t.ModelUsage),
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, StartedAt: t.StartedAt, FinishedAt: t.FinishedAt,
		IdempotencyKey: t.IdempotencyKey, Removing: t.Removing, NextEvent: t.NextEvent,
	}
	return w
}

func wireStep(s ledger.StepState) api.StepState { return api.StepState(s) }

func wireFailure(f *ledger.Failure) *api.Failure {
	if f == nil {
		return nil
	}
	return &api.Failure{Kind: string(f.Kind), Message: f.Message, Step: f.Step, Item: f.Item, Attempt: f.Attempt, Single: f.Single}
}

func wirePause(p *ledger.PauseReason) *api.PauseReason {
	if p == nil {
		return nil
	}
	return &api.PauseReason{Kind: api.PauseKind(p.Kind), Name: p.Name, By: p.By, At: p.At, Note: p.Note, Used: p.Used, Limit: p.Limit}
}

func wireBudget(b *ledger.Budget) *api.Budget {
	if b == nil {
		return nil
	}
	return &api.Budget{Limits: api.BudgetLimits(b.Limits), Units: b.Units, WallTime: b.WallTime,
		WallSince: b.WallSince, Warned: b.Warned, RepairGrace: b.RepairGrace}
}

func wireFact(f *ledger.FactChange) *api.FactChange {
	if f == nil {
		return nil
	}
	w := api.FactChange(*f)
	return &w
}

func wireNotify(n *ledger.NotifySpec) *api.NotifySpec {
	if n == nil {
		return nil
	}
	w := &api.NotifySpec{URL: n.URL, Events: make([]api.EventType, len(n.Events))}
	for i, e := range n.Events {
		w.Events[i] = api.EventType(e)
	}
	return w
}

func wireMeter(p *ledger.Progress) *api.Meter {
	if p == nil {
		return nil
	}
	return &api.Meter{Unit: p.Unit, Step: p.Step, StepIndex: p.StepIndex, Labels: p.Labels,
		Committed: p.Committed, Samples: wireList(p.Samples, wireSample), Last: wireSample(p.Last), Kinds: p.Kinds}
}

func wireSample(s ledger.ProgressSample) api.MeterSample { return api.MeterSample(s) }

func wireModelUsage(u ledger.ModelUsage) api.ModelUsage {
	return api.ModelUsage{Calls: u.Calls, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Cost: u.Cost,
		PossiblyBilled: api.ModelPossiblyBilled(u.PossiblyBilled)}
}

func wireEvent(e ledger.Event) api.Event {
	w := api.Event{Seq: e.Seq, Time: e.Time, Type: api.EventType(e.Type), Step: e.Step, Item: e.Item,
		Attempt: e.Attempt, Epoch: e.Epoch, Owner: e.Owner, Kind: string(e.Kind), Message: e.Message,
		Pause: wirePause(e.Pause), Fact: wireFact(e.Fact), Approval: e.Approval}
	if e.Model != nil {
		m := api.ModelCallEvent(*e.Model)
		w.Model = &m
	}
	return w
}

func wireAttempt(a *ledger.Attempt) *api.Attempt {
	return &api.Attempt{Step: a.Step, Item: a.Item, Attempt: a.Attempt, Epoch: a.Epoch, Owner: a.Owner,
		Output: a.Output, Failure: wireFailure(a.Failure), Repair: a.Repair, Log: a.Log,
		Started: a.Started, Finished: a.Finished, Pass: a.Pass, Try: a.Try, Environment: a.Environment}
}

func wireItemOutput(o ledger.ItemOutput) api.ItemOutput { return api.ItemOutput(o) }

func wireFailedItem(f ledger.FailedItem) api.FailedItem {
	return api.FailedItem{Step: f.Step, Item: f.Item, Key: f.Key, Value: f.Value, Attempt: f.Attempt, Failure: wireFailure(f.Failure)}
}

func wireNote(n ledger.Note) api.Note { return api.Note(n) }

func wireApproval(a ledger.Approval) api.Approval {
	return api.Approval{ID: a.ID, Task: a.Task, Step: a.Step, StepIndex: a.StepIndex, Item: a.Item, Pass: a.Pass,
		Source: a.Source, Prompt: a.Prompt, Subject: a.Subject, SubjectSHA256: a.SubjectSHA256, Created: a.Created,
		Expires: a.Expires, OnExpiry: a.OnExpiry, State: api.ApprovalState(a.State), DecidedBy: a.DecidedBy,
		DecidedAt: a.DecidedAt, Note: a.Note, UsedBy: a.UsedBy, Void: a.Void}
}

func wireEffect(e ledger.Effect) api.Effect {
	return api.Effect{Task: e.Task, Step: e.Step, StepName: e.StepName, Item: e.Item, Key: e.Key, Kind: e.Kind,
		Mode: e.Mode, IdempotencyKey: e.IdempotencyKey, Request: e.Request, State: api.EffectState(e.State),
		Outcome: e.Outcome, Attempt: e.Attempt, Performs: e.Performs, Resend: e.Resend, Note: e.Note,
		IntentAt: e.IntentAt, DoneAt: e.DoneAt}
}

func wireProvenance(p ledger.Provenance) api.Provenance { return api.Provenance(p) }

func wirePluginPins(m map[string]ledger.PluginPin) map[string]api.PluginPin {
	w := make(map[string]api.PluginPin, len(m))
	for k, p := range m {
		w[k] = api.PluginPin(p)
	}
	return w
}

func wireModelPin(p ledger.ModelPin) api.ModelPin    { return api.ModelPin(p) }
func wirePolicyPin(p ledger.PolicyPin) api.PolicyPin { return api.PolicyPin(p) }
func wirePromptPin(p ledger.PromptPin) api.PromptPin { return api.PromptPin(p) }

func wireReplayPin(p *ledger.ReplayPin) *api.ReplayPin {
	if p == nil {
		return nil
	}
	w := api.ReplayPin(*p)
	return &w
}

func wireGC(r *engine.GCReport) *api.GCReport {
	return &api.GCReport{Blobs: r.Blobs, BlobBytes: r.BlobBytes, Orphans: r.Orphans, OrphanBytes: r.OrphanBytes,
		VlogFiles: r.VlogFiles, Workspaces: r.Workspaces, WorkspaceBytes: r.WorkspaceBytes}
}

func wireHandoff(b *handoff.Bundle) *api.Handoff {
	w := &api.Handoff{
		Task:        api.HandoffTask{ID: b.Task.ID, Name: b.Task.Name, Status: api.Status(b.Task.Status), Reason: b.Task.Reason},
		Objective:   b.Objective,
		Constraints: b.Constraints,
		Checkpoint:  api.Checkpoint(b.Checkpoint),
		Pending:     wireList(b.Pending, func(p handoff.PendingStep) api.PendingStep { return api.PendingStep(p) }),
		Decisions:   wireList(b.Decisions, wireNote),
		Blockers:    wireList(b.Blockers, wireNote), BlockersTotal: b.BlockersTotal,
		Findings: api.HandoffFindings{Total: b.Findings.Total, Summaries: b.Findings.Summaries,
			Counters: b.Findings.Counters, Recent: wireList(b.Findings.Recent, wireNote)},
		Artifacts:      wireList(b.Artifacts, func(a handoff.Artifact) api.HandoffArtifact { return api.HandoffArtifact(a) }),
		ArtifactsTotal: b.ArtifactsTotal,
		Waiting: api.HandoffWaiting{Approvals: wireList(b.Waiting.Approvals, wireApproval),
			Effects: b.Waiting.Effects, Pause: wirePause(b.Waiting.Pause)},
		NextActions: b.NextActions,
		Built:       b.Built,
	}
	w.Completed = wireList(b.Completed, func(c handoff.CompletedStep) api.CompletedStep {
		return api.CompletedStep{Name: c.Name, Pass: c.Pass, Units: c.Units, Failed: c.Failed,
			Evidence:      wireList(c.Evidence, func(e handoff.Evidence) api.Evidence { return api.Evidence(e) }),
			EvidenceTotal: c.EvidenceTotal}
	})
	if e := b.Environment; e != nil {
		w.Environment = &api.HandoffEnvironment{Facts: e.Facts, Read: e.Read, Drift: wireFact(e.Drift)}
	}
	return w
}

// wireList converts a list, keeping nil nil and empty empty (null and []
// in JSON, as the store's record had them).
func wireList[S, W any](l []S, f func(S) W) []W {
	if l == nil {
		return nil
	}
	w := make([]W, len(l))
	for i := range l {
		w[i] = f(l[i])
	}
	return w
}
