package store

import "github.com/lhengine/lhengine/ledger"

// A replay set is the recorded model responses a task's model calls are
// answered from instead of a provider (--model-replay DIR). It is part of
// the submission: Submit copies the recordings and the set's index into
// the content-addressed blob table (internal/blob), and the manifest pins
// the set (ReplayPin). A worker answers the task's calls from these blobs,
// never from the folder; gc removes a set once no manifest pins it.

// ReplayIndex reads the index of the replay set with sha256 set. It
// returns an error wrapping ErrNotFound when the store does not hold it.
func (s *Store) ReplayIndex(set string) (ledger.ReplayIndex, error) { return s.blobs.ReplayIndex(set) }

// ReplayRecording returns the recording file whose sha256 is file (an
// entry of a ReplayIndex), verified against it.
func (s *Store) ReplayRecording(file string) ([]byte, error) { return s.blobs.ReplayRecording(file) }
