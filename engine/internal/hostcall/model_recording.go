package hostcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

// ReadReplayDir reads the recordings of dir (its *.json files; other files
// and folders are left alone) into a replay set, checking that each is a
// recording of the request its name says. A folder with no recordings, a
// file that is not one, and recordings of more than store.MaxReplayBytes
// in all are errors naming the folder or file.
func ReadReplayDir(dir string) (*ledger.ReplaySet, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, fmt.Errorf("--model-replay: %w", err)
	}
	recs := map[string][]byte{}
	var total int64
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(abs, name)
		// The budget is charged with what is read, not with a size seen
		// before: a file that grows after a look would slip past it.
		b, ok, err := readRegular(path, ledger.MaxReplayBytes-total)
		if err != nil {
			return nil, fmt.Errorf("--model-replay %s: %w; its recordings are at most %d bytes in all", abs, err, ledger.MaxReplayBytes)
		}
		if !ok {
			continue
		}
		total += int64(len(b))
		sum := strings.TrimSuffix(name, ".json")
		var r Recording
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("--model-replay: %s is not a recorded model response: %v", path, err)
		}
		if r.RequestSHA256 != sum || r.Provider == "" {
			return nil, fmt.Errorf("--model-replay: %s is not the recording of request sha256 %s (--model-record names each file by its request's sha256)", path, sum)
		}
		recs[sum] = b
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("--model-replay: %s holds no recordings (<request sha256>.json files, made with --model-record)", abs)
	}
	return ledger.NewReplaySet(abs, recs)
}

// readRegular reads the file at path if it is a regular file (ok false,
// and nothing read, for anything else; taskfile.OpenRegular), refusing one
// of more than max bytes.
func readRegular(path string, max int64) (b []byte, ok bool, err error) {
	b, err = taskfile.ReadRegular(path, max)
	switch {
	case taskfile.IsNotRegular(err):
		return nil, false, nil
	case errors.Is(err, taskfile.ErrTooLarge):
		return nil, false, fmt.Errorf("%s takes it past the limit", path)
	case err != nil:
		return nil, false, err
	}
	return b, true, nil
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
