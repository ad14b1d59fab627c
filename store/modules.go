package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/kv"
)

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

// holdBlobs takes blobMu shared and returns its release.
func holdBlobs() (release func()) {
	blobMu.RLock()
	return blobMu.RUnlock
}

// putBlob stores data under its sha256 (hexSum) unless the blob is already
// there. Each chunk is its own transaction and the blob record is written
// last: it is the blob's commit point, so a put cut short leaves chunks
// without a record, which gc collects. The caller holds holdBlobs.
func (s *Store) putBlob(ctx context.Context, hexSum string, data []byte) (stored bool, err error) {
	exists := false
	if err := s.view(func(t *kv.Tx) error {
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
		if err := s.update(ctx, func(t *kv.Tx) error { return t.Put(kv.ChunkKey(hexSum, n), chunk) }); err != nil {
			return false, fmt.Errorf("storing blob %s chunk %d: %w", hexSum[:12], n, err)
		}
		chunks++
		if end == len(data) {
			break
		}
	}
	meta := blobMeta{Size: int64(len(data)), Chunks: chunks}
	if err := s.update(ctx, func(t *kv.Tx) error { return t.PutJSON(kv.BlobKey(hexSum), meta) }); err != nil {
		return false, err
	}
	return true, nil
}

// readBlob returns the whole blob hexSum, checked against its sha256.
// ErrNotFound when the store has no such blob.
func (s *Store) readBlob(hexSum string) ([]byte, error) {
	var out []byte
	err := s.view(func(t *kv.Tx) error {
		var m blobMeta
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
	b, err := s.readBlob(sum)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", sum, err)
	}
	return b, nil
}

// putModules stores the modules nt's manifest pins, from modules (by
// sha256, lower-case hex, holding every module the manifest pins): chunk by
// chunk, each once however many tasks pin it, before the task record that
// pins them, so a task in the store always finds its modules there. The
// caller holds holdBlobs.
func (s *Store) putModules(ctx context.Context, nt ledger.NewTask, modules map[string][]byte) error {
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
		if _, err := s.putBlob(ctx, sum, modules[sum]); err != nil {
			return fmt.Errorf("storing module %s: %w", sum, err)
		}
	}
	return nil
}
