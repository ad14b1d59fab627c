package hostcall

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
)

// Recorded model responses, for tests and evals that must run the same
// model conversation without a network: --model-record DIR writes each live
// response to DIR/<request sha256>.json; --model-replay DIR, given at
// submit, copies the recordings of DIR into the store with the task (a
// replay set, store/replay.go), and the task's calls are answered from
// those copies and send nothing. The request's hash is the journal's
// (requestHash): the provider, the model id and every field of the request
// but its key, so a recording made against one endpoint replays for the
// same model id at any base_url, and a conversation that changes in any way
// misses.

// Recording is a recorded model response: one file of a recording folder.
type Recording struct {
	RequestSHA256 string        `json:"request_sha256"`
	Provider      string        `json:"provider"`
	ModelID       string        `json:"model_id"`
	Response      ModelResponse `json:"response"` // without cost and replayed
}

// Replay is a task's replay set as its attempts read it: the manifest's
// pin and the set's index, from the store.
type Replay struct {
	Pin   ledger.ReplayPin
	Index ledger.ReplayIndex
}

// recorded answers a call from the task's replay set: the recorded
// response, its cost counted at the task's prices. A call with no
// recording is StatusUnavailable, naming the request's hash.
func (a *Attempt) recorded(m *taskfile.Model, sum string) (*ModelResponse, error) {
	p := a.Replay.Pin
	file, ok := a.Replay.Index[sum]
	if !ok {
		return nil, herr(guest.StatusUnavailable, "model %q: no recorded response for request sha256 %s in the task's replay set (%d recordings from %s, sha256 %s); record it with --model-record", m.Name, sum, p.Recordings, p.Dir, p.SHA256)
	}
	b, err := a.Store.ReplayRecording(file)
	if err != nil {
		return nil, herr(guest.StatusUnavailable, "model %q: reading the recorded response of request sha256 %s: %v", m.Name, sum, err)
	}
	var r Recording
	if err := json.Unmarshal(b, &r); err != nil || r.RequestSHA256 != sum {
		return nil, herr(guest.StatusUnavailable, "model %q: the replay set's recording %s is not the recording of request sha256 %s", m.Name, file, sum)
	}
	resp := r.Response
	resp.Replayed = false
	if resp.ToolCalls == nil {
		resp.ToolCalls = []ModelToolCall{}
	}
	return &resp, nil
}

// saveRecording writes a live response to the record folder: a temporary file,
// synced, renamed into place.
func (a *Attempt) saveRecording(m *taskfile.Model, sum string, resp *ModelResponse) error {
	r := Recording{RequestSHA256: sum, Provider: m.Provider, ModelID: m.ID, Response: *resp}
	r.Response.Cost, r.Response.Replayed = 0, false
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(a.ModelRecord, 0o755); err != nil {
		return fmt.Errorf("--model-record: %w", err)
	}
	f, err := os.CreateTemp(a.ModelRecord, ".rec-*")
	if err != nil {
		return fmt.Errorf("--model-record: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("--model-record: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("--model-record: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--model-record: %w", err)
	}
	return os.Rename(f.Name(), filepath.Join(a.ModelRecord, sum+".json"))
}
