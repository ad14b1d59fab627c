// Package blob is the store's content-addressed blob table: artifacts,
// plugin modules and replay sets (their recordings and index), each stored
// once under its sha256, in chunks, its record written last (Store.Put);
// read back checked against its sum (Store.Read). Hold and LockAll order
// blob writers against the collection of unreferenced blobs.
package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/quota"
)

// Meta is a blob's record (B/<sha256>): its size and number of chunks.
type Meta struct {
	Size   int64 `json:"size"`
	Chunks int   `json:"chunks"`
}

// Store puts and reads the blobs of a store: View reads, Update writes
// through the store's group commit, Now is its clock.
type Store struct {
	DB     *kv.DB
	Update kv.Update
	Now    func() time.Time
}

// PutArtifact stores data (deduplicated by its sha256) and records its
// provenance p; it returns the ref "sha256:<hex>". The same unit putting
// the same content under the same name again (a retry) updates one
// provenance record instead of adding another. Each distinct content counts
// once against the task's artifact quota of limit bytes (artifact_bytes),
// checked first against the puts in flight; content that does not fit is
// refused with a *QuotaError before anything is written.
func (s *Store) PutArtifact(ctx context.Context, inflight *quota.Inflight, p ledger.Provenance, data []byte, limit int64) (string, error) {
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	p.Ref, p.Size = "sha256:"+hexSum, int64(len(data))
	release, err := inflight.Precheck(s.DB, p.Task, hexSum, p.Size, limit)
	if err != nil {
		return "", err
	}
	defer release()
	if inflight.Hook != nil {
		inflight.Hook()
	}
	if p.Time.IsZero() {
		p.Time = s.Now()
	}
	if p.Policies == nil {
		p.Policies = []string{}
	}
	// Held until the provenance record refers to the blob (see Hold).
	defer Hold()()
	if _, err := s.Put(ctx, hexSum, data); err != nil {
		return "", err
	}
	err = s.Update(ctx, func(t *kv.Tx) error {
		t.Durable = true
		if err := quota.ChargeArtifact(t, p.Task, hexSum, p.Size, limit); err != nil {
			return err
		}
		return t.PutJSON(kv.ProvKey(p.Task, p.Step, p.Item, hexSum, p.Name), p)
	})
	if err != nil {
		return "", err
	}
	return p.Ref, nil
}

// ReadAt copies up to len(buf) bytes of the blob of artifact ref, starting
// at offset, into buf; it returns the number copied (0 at the end) and the
// artifact's size. ErrNotFound for an unknown ref.
func (s *Store) ReadAt(ref string, offset int64, buf []byte) (int, int64, error) {
	hexSum, ok := strings.CutPrefix(ref, "sha256:")
	if !ok || len(hexSum) != 64 {
		return 0, 0, fmt.Errorf("artifact ref %q: want sha256:<64 hex digits>: %w", ref, ledger.ErrNotFound)
	}
	var n int
	var size int64
	err := s.DB.View(func(t *kv.Tx) error {
		var m Meta
		if err := t.GetJSON(kv.BlobKey(hexSum), &m); err != nil {
			return fmt.Errorf("artifact %s: %w", ref, err)
		}
		size = m.Size
		for n < len(buf) && offset+int64(n) < m.Size {
			pos := offset + int64(n)
			chunk, err := t.GetRaw(kv.ChunkKey(hexSum, int(pos/ledger.ArtifactChunk)))
			if err != nil {
				return fmt.Errorf("artifact %s chunk %d: %w", ref, pos/ledger.ArtifactChunk, err)
			}
			n += copy(buf[n:], chunk[pos%ledger.ArtifactChunk:])
		}
		return nil
	})
	return n, size, err
}

// Plugin modules are pinned by keeping their bytes in the store, in the same
// content-addressed blob table as artifacts (B/<sha256> and its chunks
// b/<sha256>/<n>): a module that a thousand tasks pin is stored once, and a
// task runs from the bytes it was submitted with whatever happens to the file
// afterwards. A blob is referenced by manifests (modules) and provenance
// records (artifacts); gc removes the blobs nothing refers to.

// blobMu orders blob writers against gc. Writers (PutArtifact,
// Submit with modules) hold it shared from the moment they look for a blob
// until the record that refers to it is committed; gc holds it exclusively
// while it decides which blobs are unreferenced and deletes them. So gc never
// deletes the chunks of a put in flight (a blob without its record yet), nor
// a blob that a writer found present and is about to refer to.
//
// It is one lock for the process, not one per Store: Badger's directory
// lock makes one process the only writer of a store, so every writer gc
// could race with is in this process, and gc is rare enough that making the
// writers of other stores of the same process wait for it costs nothing.
var blobMu sync.RWMutex

// Hold takes the blob lock shared and returns its release: a writer holds
// it from the moment it looks for a blob until the record that refers to
// it is committed.
func Hold() (release func()) {
	blobMu.RLock()
	return blobMu.RUnlock
}

// LockAll takes the blob lock exclusively and returns its release: gc
// holds it while it decides which blobs are unreferenced and deletes them.
func LockAll() (unlock func()) {
	blobMu.Lock()
	return blobMu.Unlock
}

// Put stores data under its sha256 (hexSum) unless the blob is already
// there. Each chunk is its own transaction and the blob record is written
// last: it is the blob's commit point, so a put cut short leaves chunks
// without a record, which gc collects. The caller holds Hold.
func (s *Store) Put(ctx context.Context, hexSum string, data []byte) (stored bool, err error) {
	exists := false
	if err := s.DB.View(func(t *kv.Tx) error {
		_, err := t.GetRaw(kv.BlobKey(hexSum))
		exists = err == nil
		if errors.Is(err, ledger.ErrNotFound) {
			return nil
		}
		return err
	}); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	chunks := 0
	for off := 0; off < len(data) || chunks == 0; off += ledger.ArtifactChunk {
		end := min(off+ledger.ArtifactChunk, len(data))
		chunk, n := data[off:end], chunks
		if err := s.Update(ctx, func(t *kv.Tx) error { return t.Put(kv.ChunkKey(hexSum, n), chunk) }); err != nil {
			return false, fmt.Errorf("storing blob %s chunk %d: %w", hexSum[:12], n, err)
		}
		chunks++
		if end == len(data) {
			break
		}
	}
	meta := Meta{Size: int64(len(data)), Chunks: chunks}
	if err := s.Update(ctx, func(t *kv.Tx) error { return t.PutJSON(kv.BlobKey(hexSum), meta) }); err != nil {
		return false, err
	}
	return true, nil
}

// Read returns the whole blob hexSum, checked against its sha256.
// ErrNotFound when the store has no such blob.
func (s *Store) Read(hexSum string) ([]byte, error) {
	var out []byte
	err := s.DB.View(func(t *kv.Tx) error {
		var m Meta
		if err := t.GetJSON(kv.BlobKey(hexSum), &m); err != nil {
			return err
		}
		buf := bytes.NewBuffer(make([]byte, 0, m.Size))
		for n := range m.Chunks {
			chunk, err := t.GetRaw(kv.ChunkKey(hexSum, n))
			if errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("blob %s: chunk %d of %d is missing: the store is damaged", hexSum, n, m.Chunks)
			} else if err != nil {
				return err
			}
			buf.Write(chunk)
		}
		out = buf.Bytes()
		return nil
	})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(out)
	if got := hex.EncodeToString(sum[:]); got != hexSum {
		return nil, fmt.Errorf("blob %s: stored bytes have sha256 %s: the store is damaged", hexSum, got)
	}
	return out, nil
}

// Module returns the bytes of the plugin module pinned with sha256 sum
// (lower-case hex), verified against it. It returns an error wrapping
// ErrNotFound when the store does not hold the module: tasks submitted by
// engines that did not keep module bytes pin only a path.
func (s *Store) Module(sum string) ([]byte, error) {
	if len(sum) != 64 {
		return nil, fmt.Errorf("module sha256 %q: want 64 hex digits: %w", sum, ledger.ErrNotFound)
	}
	b, err := s.Read(sum)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", sum, err)
	}
	return b, nil
}

// PutModules stores the modules nt's manifest pins, from modules (by
// sha256, lower-case hex, holding every module the manifest pins): chunk by
// chunk, each once however many tasks pin it, before the task record that
// pins them, so a task in the store always finds its modules there. The
// caller holds Hold.
func (s *Store) PutModules(ctx context.Context, nt ledger.NewTask, modules map[string][]byte) error {
	sums := make([]string, 0, len(nt.Manifest.Plugins))
	seen := map[string]bool{}
	for step, pin := range nt.Manifest.Plugins {
		if seen[pin.SHA256] {
			continue // checked once however many steps pin it
		}
		data, ok := modules[pin.SHA256]
		if !ok {
			return fmt.Errorf("step %q: the module %s pinned with sha256 %s was not given", step, pin.Path, pin.SHA256)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != pin.SHA256 {
			return fmt.Errorf("step %q: the bytes given for %s do not have the pinned sha256 %s", step, pin.Path, pin.SHA256)
		}
		seen[pin.SHA256] = true
		sums = append(sums, pin.SHA256)
	}
	sort.Strings(sums)
	for _, sum := range sums {
		if _, err := s.Put(ctx, sum, modules[sum]); err != nil {
			return fmt.Errorf("storing module %s: %w", sum, err)
		}
	}
	return nil
}

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

// PutReplay stores the replay set nt brings (its recordings and index,
// each once however many tasks replay them), which its manifest must pin.
// The caller holds Hold.
func (s *Store) PutReplay(ctx context.Context, nt ledger.NewTask) error {
	set := nt.Replay
	switch pin := nt.Manifest.ModelReplay; {
	case set == nil && pin != nil:
		return fmt.Errorf("the manifest pins replay set %s, which was not given", pin.SHA256)
	case set != nil && (pin == nil || *pin != set.Pin()):
		return errors.New("the manifest does not pin the replay set given")
	case set != nil:
		for _, file := range slices.Sorted(maps.Keys(set.Files())) {
			if _, err := s.Put(ctx, file, set.Files()[file]); err != nil {
				return fmt.Errorf("storing recording %s: %w", file, err)
			}
		}
		// The index last: a set whose index is stored has all its recordings.
		if _, err := s.Put(ctx, set.Pin().SHA256, set.Index()); err != nil {
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
	b, err := s.Read(set)
	if err != nil {
		return nil, fmt.Errorf("replay set %s: %w", set, err)
	}
	return ParseReplayIndex(set, b)
}

// ParseReplayIndex reads the index of replay set set.
func ParseReplayIndex(set string, b []byte) (ledger.ReplayIndex, error) {
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
	b, err := s.Read(file)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", file, err)
	}
	return b, nil
}

// ReplayBlobs adds to used the blobs of the replay set with sha256 set:
// its index and its recordings. gc calls it holding LockAll.
func (s *Store) ReplayBlobs(set string, used map[string]bool) error {
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
