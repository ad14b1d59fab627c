package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lhengine/lhengine/ledger"
)

// A replay set is the recorded model responses a task's model calls are
// answered from instead of a provider (--model-replay DIR). It is part of
// the submission: the recordings are copied into the store with the task,
// in the content-addressed blob table that holds modules and artifacts,
//
//	B/<file sha256>     one recording file, as read at submit
//	B/<set sha256>      the set's index: "<request sha256> <file sha256>\n"
//	                    for each recording, sorted, so the index's sha256
//	                    is the set's
//
// and the manifest pins the set (ReplayPin). A worker answers the task's
// calls from these blobs, never from the folder: a resume after the folder
// is gone, a retry, or a worker of another process (serve) replays the same
// conversation. A set replayed by many tasks is stored once; gc removes it
// once no manifest pins it.

// putReplay stores the replay set nt brings (its recordings and index,
// each once however many tasks replay them), which its manifest must pin.
// The caller holds holdBlobs.
func (s *Store) putReplay(ctx context.Context, nt ledger.NewTask) error {
	set := nt.Replay
	switch pin := nt.Manifest.ModelReplay; {
	case set == nil && pin != nil:
		return fmt.Errorf("the manifest pins replay set %s, which was not given", pin.SHA256)
	case set != nil && (pin == nil || *pin != set.Pin()):
		return errors.New("the manifest does not pin the replay set given")
	case set != nil:
		for _, file := range slices.Sorted(maps.Keys(set.Files())) {
			if _, err := s.putBlob(ctx, file, set.Files()[file]); err != nil {
				return fmt.Errorf("storing recording %s: %w", file, err)
			}
		}
		// The index last: a set whose index is stored has all its recordings.
		if _, err := s.putBlob(ctx, set.Pin().SHA256, set.Index()); err != nil {
			return fmt.Errorf("storing replay set %s: %w", set.Pin().SHA256, err)
		}
	}
	return nil
}

// ReplayIndex reads the index of the replay set with sha256 set. It
// returns an error wrapping ErrNotFound when the store does not hold it.
func (s *Store) ReplayIndex(set string) (ledger.ReplayIndex, error) {
	if !ledger.IsSHA256(set) {
		return nil, fmt.Errorf("replay set %q: want 64 hex digits: %w", set, ledger.ErrNotFound)
	}
	b, err := s.readBlob(set)
	if err != nil {
		return nil, fmt.Errorf("replay set %s: %w", set, err)
	}
	return parseReplayIndex(set, b)
}

func parseReplayIndex(set string, b []byte) (ledger.ReplayIndex, error) {
	idx := ledger.ReplayIndex{}
	for line := range strings.Lines(string(b)) {
		req, file, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if !ok || !ledger.IsSHA256(req) || !ledger.IsSHA256(file) {
			return nil, fmt.Errorf("replay set %s: index line %q is not \"<request sha256> <file sha256>\": the store is damaged", set, line)
		}
		idx[req] = file
	}
	return idx, nil
}

// ReplayRecording returns the recording file whose sha256 is file (an
// entry of a ReplayIndex), verified against it.
func (s *Store) ReplayRecording(file string) ([]byte, error) {
	if !ledger.IsSHA256(file) {
		return nil, fmt.Errorf("recording %q: want 64 hex digits: %w", file, ledger.ErrNotFound)
	}
	b, err := s.readBlob(file)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", file, err)
	}
	return b, nil
}

// replayBlobs adds to used the blobs of the replay set with sha256 set:
// its index and its recordings. gc calls it with blobMu held.
func (s *Store) replayBlobs(set string, used map[string]bool) error {
	used[set] = true
	idx, err := s.ReplayIndex(set)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil // submitted without its set (a damaged store): nothing to keep
	}
	if err != nil {
		return err
	}
	for _, file := range idx {
		used[file] = true
	}
	return nil
}
