package hostcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

// Recorded model responses, for tests and evals that must run the same
// model conversation without a network: --model-record DIR writes each live
// response to DIR/<request sha256>.json, --model-replay DIR answers calls
// from those files and sends nothing. The request's hash is the journal's
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

// recorded answers a call from the replay folder: the recorded response,
// its cost counted at the task's prices. A call with no recording is
// StatusUnavailable, naming the request's hash.
func (a *Attempt) recorded(m *taskfile.Model, sum string) (*ModelResponse, error) {
	path := filepath.Join(a.ModelReplay, sum+".json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, herr(guest.StatusUnavailable, "model %q: no recorded response for request sha256 %s in %s (--model-replay); record it with --model-record", m.Name, sum, a.ModelReplay)
	}
	if err != nil {
		return nil, herr(guest.StatusUnavailable, "model %q: reading the recorded response: %v", m.Name, err)
	}
	var r Recording
	if err := json.Unmarshal(b, &r); err != nil || r.RequestSHA256 != sum {
		return nil, herr(guest.StatusUnavailable, "model %q: %s is not the recording of request sha256 %s", m.Name, path, sum)
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
