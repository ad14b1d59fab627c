// Package hostcall implements the host capabilities a step attempt reaches
// through the ABI: artifacts, the effect journal (exactly-once side effects),
// http.fetch, progress counts and notes, and the unit's own key/value cursor.
// Every capability is deny-by-default: a step reaches only what its task
// file grants it.
package hostcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/store"
)

// Attempt is the host side of one attempt's capability calls. Create one per
// attempt; its methods are called from the guest's goroutine.
type Attempt struct {
	Store    *store.Store
	Lease    store.Lease
	TaskName string
	Step     *taskfile.Step
	// Workspace is the task's workspace folder on the host ("" if none).
	Workspace    string
	PluginSHA256 string
	InputSHA256  string
	// Client performs http effects and fetches; nil means a default client.
	Client *http.Client

	mu     sync.Mutex
	counts map[string]int64
	notes  []store.Note
	pause  string
}

// Progress returns the counts and notes the attempt reported, to be
// committed with its outcome.
func (a *Attempt) Progress() (map[string]int64, []store.Note) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts, a.notes
}

// PauseReason is set when the attempt must stop for a human (an effect whose
// outcome is unknown under mode manual).
func (a *Attempt) PauseReason() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pause
}

func herr(status int32, format string, args ...any) error {
	return &guest.HostError{Status: status, Message: fmt.Sprintf(format, args...)}
}

// Call dispatches a JSON capability call.
func (a *Attempt) Call(ctx context.Context, name string, req []byte) ([]byte, error) {
	switch name {
	case "effect.do":
		return a.effect(ctx, req)
	case "http.fetch":
		return a.fetch(ctx, req)
	case "progress.count":
		var r struct {
			Name  string `json:"name"`
			Delta int64  `json:"delta"`
		}
		if err := json.Unmarshal(req, &r); err != nil || r.Name == "" {
			return nil, herr(guest.StatusInvalid, "progress.count wants {\"name\": string, \"delta\": integer}")
		}
		a.mu.Lock()
		if a.counts == nil {
			a.counts = map[string]int64{}
		}
		a.counts[r.Name] += r.Delta
		a.mu.Unlock()
		return []byte("{}"), nil
	case "progress.note":
		var r struct{ Kind, Text string }
		if err := json.Unmarshal(req, &r); err != nil {
			return nil, herr(guest.StatusInvalid, "progress.note wants {\"kind\": string, \"text\": string}")
		}
		switch r.Kind {
		case "finding", "decision", "blocker":
		default:
			return nil, herr(guest.StatusInvalid, "progress.note kind %q: want finding, decision or blocker", r.Kind)
		}
		a.mu.Lock()
		a.notes = append(a.notes, store.Note{Kind: r.Kind, Text: r.Text})
		a.mu.Unlock()
		return []byte("{}"), nil
	case "kv.get":
		var r struct{ Key string }
		if err := json.Unmarshal(req, &r); err != nil || r.Key == "" {
			return nil, herr(guest.StatusInvalid, "kv.get wants {\"key\": string}")
		}
		v, ok, err := a.Store.KVGet(a.Lease.Task, a.Lease.Step, a.Lease.Item, r.Key)
		if err != nil {
			return nil, err
		}
		return json.Marshal(struct {
			Found bool            `json:"found"`
			Value json.RawMessage `json:"value"`
		}{ok, orNull(v)})
	case "kv.put":
		var r struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(req, &r); err != nil || r.Key == "" {
			return nil, herr(guest.StatusInvalid, "kv.put wants {\"key\": string, \"value\": any}")
		}
		if err := a.Store.KVPut(ctx, a.Lease, r.Key, orNull(r.Value)); err != nil {
			if errors.Is(err, store.ErrLeaseLost) {
				return nil, herr(guest.StatusLeaseLost, "%v", err)
			}
			return nil, err
		}
		return []byte("{}"), nil
	}
	return nil, herr(guest.StatusUnavailable, "unknown capability %q", name)
}

// PutArtifact stores an artifact with its provenance.
func (a *Attempt) PutArtifact(ctx context.Context, meta, data []byte) ([]byte, error) {
	var m struct {
		Name      string `json:"name"`
		MediaType string `json:"media_type"`
	}
	if err := json.Unmarshal(meta, &m); err != nil || m.Name == "" {
		return nil, herr(guest.StatusInvalid, "artifact meta wants {\"name\": string, \"media_type\": string}")
	}
	ref, err := a.Store.PutArtifact(ctx, store.Provenance{
		Name: m.Name, MediaType: m.MediaType, Task: a.Lease.Task, Step: a.Step.Name, Item: a.Lease.Item,
		Attempt: a.Lease.Attempt, PluginSHA256: a.PluginSHA256, InputSHA256: a.InputSHA256,
	}, data)
	if err != nil {
		return nil, err
	}
	crashpoint.Reached(crashpoint.ArtifactAfterPut)
	return json.Marshal(map[string]any{"ref": ref, "size": len(data)})
}

// ReadArtifact reads part of an artifact by ref.
func (a *Attempt) ReadArtifact(_ context.Context, ref string, offset int64, buf []byte) (int, error) {
	n, _, err := a.Store.ReadArtifact(ref, offset, buf)
	if errors.Is(err, store.ErrNotFound) {
		return 0, herr(guest.StatusNotFound, "%v", err)
	}
	return n, err
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
