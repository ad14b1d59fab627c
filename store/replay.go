package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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

// MaxReplayBytes bounds a replay set: the recordings' total size. They are
// read into memory at submit.
const MaxReplayBytes = 64 << 20

// ReplaySet is a replay set ready to be stored: each recording file's bytes
// by the sha256 of its request.
type ReplaySet struct {
	pin   ReplayPin
	index []byte
	files map[string][]byte // by file sha256
}

// ReplayIndex maps a request's sha256 to the sha256 of its recording file.
type ReplayIndex map[string]string

// NewReplaySet builds the replay set of recordings (each recording file's
// bytes by the sha256 of the request it answers, 64 lower-case hex digits)
// read from dir, and the pin a manifest records for it. A set larger than
// MaxReplayBytes is an error.
func NewReplaySet(dir string, recordings map[string][]byte) (*ReplaySet, error) {
	set := &ReplaySet{files: map[string][]byte{}}
	var idx bytes.Buffer
	var total int64
	for _, req := range slices.Sorted(maps.Keys(recordings)) {
		if !isSHA256(req) {
			return nil, fmt.Errorf("replay set: %q is not a request sha256 (64 lower-case hex digits)", req)
		}
		b := recordings[req]
		if total += int64(len(b)); total > MaxReplayBytes {
			return nil, fmt.Errorf("replay set %s: its recordings are more than %d bytes; replay a smaller conversation", dir, MaxReplayBytes)
		}
		sum := sha256.Sum256(b)
		file := hex.EncodeToString(sum[:])
		set.files[file] = b
		fmt.Fprintf(&idx, "%s %s\n", req, file)
	}
	set.index = idx.Bytes()
	sum := sha256.Sum256(set.index)
	set.pin = ReplayPin{Dir: dir, Recordings: len(recordings), Bytes: total, SHA256: hex.EncodeToString(sum[:])}
	return set, nil
}

// Pin is what a manifest records of the set.
func (r *ReplaySet) Pin() ReplayPin { return r.pin }

// putReplay stores the replay set nt brings (its recordings and index,
// each once however many tasks replay them), which its manifest must pin.
// The caller holds holdBlobs.
func (s *Store) putReplay(ctx context.Context, nt NewTask) error {
	set := nt.Replay
	switch pin := nt.Manifest.ModelReplay; {
	case set == nil && pin != nil:
		return fmt.Errorf("the manifest pins replay set %s, which was not given", pin.SHA256)
	case set != nil && (pin == nil || *pin != set.pin):
		return errors.New("the manifest does not pin the replay set given")
	case set != nil:
		for _, file := range slices.Sorted(maps.Keys(set.files)) {
			if _, err := s.putBlob(ctx, file, set.files[file]); err != nil {
				return fmt.Errorf("storing recording %s: %w", file, err)
			}
		}
		// The index last: a set whose index is stored has all its recordings.
		if _, err := s.putBlob(ctx, set.pin.SHA256, set.index); err != nil {
			return fmt.Errorf("storing replay set %s: %w", set.pin.SHA256, err)
		}
	}
	return nil
}

// ReplayIndex reads the index of the replay set with sha256 set. It
// returns an error wrapping ErrNotFound when the store does not hold it.
func (s *Store) ReplayIndex(set string) (ReplayIndex, error) {
	if !isSHA256(set) {
		return nil, fmt.Errorf("replay set %q: want 64 hex digits: %w", set, ErrNotFound)
	}
	b, err := s.readBlob(set)
	if err != nil {
		return nil, fmt.Errorf("replay set %s: %w", set, err)
	}
	return parseReplayIndex(set, b)
}

func parseReplayIndex(set string, b []byte) (ReplayIndex, error) {
	idx := ReplayIndex{}
	for line := range strings.Lines(string(b)) {
		req, file, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if !ok || !isSHA256(req) || !isSHA256(file) {
			return nil, fmt.Errorf("replay set %s: index line %q is not \"<request sha256> <file sha256>\": the store is damaged", set, line)
		}
		idx[req] = file
	}
	return idx, nil
}

// ReplayRecording returns the recording file whose sha256 is file (an
// entry of a ReplayIndex), verified against it.
func (s *Store) ReplayRecording(file string) ([]byte, error) {
	if !isSHA256(file) {
		return nil, fmt.Errorf("recording %q: want 64 hex digits: %w", file, ErrNotFound)
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
	if errors.Is(err, ErrNotFound) {
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

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
