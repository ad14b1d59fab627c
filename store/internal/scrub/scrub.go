// Package scrub is the record check of lhengine store verify: every
// record of a store read and decoded (so every block and value checksum is
// checked), and the ledger's cross-references checked: every runnable task
// has a runnable task record, every task all its step records, every unit
// and journal entry a task, every blob its chunks, every replay set a
// manifest pins its recordings.
package scrub

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/store/internal/blob"
	"github.com/lhengine/lhengine/store/internal/filecheck"
	"github.com/lhengine/lhengine/store/internal/kv"
)

// Result is what a scrub read, and what it found.
type Result struct {
	Keys     int   // records read
	Bytes    int64 // bytes of values read
	Tasks    int   // task records
	Findings []filecheck.Finding
}

// Records reads and decodes every record of db and checks
// cross-references: the runnable marks against the tasks, each task's step
// records, the records that belong to a task, the blobs' chunks and the
// replay sets manifests pin (read through replayIndex). Findings come in
// that order.
func Records(db *badger.DB, replayIndex func(set string) (ledger.ReplayIndex, error)) Result {
	c := &scrubbed{
		tasks: map[string]*ledger.Task{}, owned: map[string][]string{}, stepRecs: map[string]int{},
		manifests: map[string]*ledger.Manifest{}, blobs: map[string]*blob.Meta{}, chunks: map[string]int{},
	}
	var res Result
	if err := db.View(func(txn *badger.Txn) error { return c.read(txn, &res) }); err != nil {
		c.add("checksum", "", "scan stopped: %s", filecheck.FirstLine(err))
	}
	res.Tasks = len(c.tasks)
	c.checkActive()
	c.checkSteps()
	c.checkOwned()
	c.checkBlobs()
	c.checkReplaySets(replayIndex)
	res.Findings = c.findings
	return res
}

// scrubbed is what a scrub read of the records, and what it found.
type scrubbed struct {
	tasks     map[string]*ledger.Task
	active    []string
	owned     map[string][]string // task id -> first key of each kind that names it
	stepRecs  map[string]int      // task id -> step records
	manifests map[string]*ledger.Manifest
	blobs     map[string]*blob.Meta // sha256 -> its meta record
	chunks    map[string]int        // sha256 -> chunk records
	findings  []filecheck.Finding
}

func (c *scrubbed) add(check, key, format string, a ...any) {
	c.findings = append(c.findings, filecheck.Finding{Check: check, File: key, Detail: fmt.Sprintf(format, a...)})
}

// read decodes every record of txn, noting what the checks need. A panic
// of Badger's reading a damaged file is an error naming the key after
// which it came.
func (c *scrubbed) read(txn *badger.Txn, rep *Result) (err error) {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	var key string
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading after %q: %s", key, strings.Join(strings.Fields(fmt.Sprint(r)), " "))
		}
	}()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		key = string(item.KeyCopy(nil))
		var val []byte
		err := kv.ItemValue(item, func(v []byte) error {
			val = slices.Clone(v)
			return nil
		})
		if err != nil {
			c.add("checksum", key, "value unreadable: %s", filecheck.FirstLine(err))
			continue
		}
		rep.Keys++
		rep.Bytes += int64(len(val))
		c.record(key, val)
	}
	return nil
}

// record decodes one record by its table, and notes it.
func (c *scrubbed) record(key string, val []byte) {
	table, rest, _ := strings.Cut(key, "/")
	id, _, _ := strings.Cut(rest, "/")
	var v any
	switch table {
	case "t":
		task := new(ledger.Task)
		c.tasks[id] = task
		if err := kv.DecodeTask(val, task); err != nil {
			c.add("record", key, "does not decode: %v", err)
		}
	case "s":
		v = new(ledger.StepState)
		c.owned[id] = append(c.owned[id], key)
		c.stepRecs[id]++
	case "m":
		m := new(ledger.Manifest)
		c.manifests[id], v = m, m
	case "u":
		v = new(ledger.Unit)
		c.owned[id] = append(c.owned[id], key)
	case "o":
		v = new(ledger.Attempt)
	case "e":
		v = new(ledger.Event)
	case "j":
		v = new(ledger.Effect)
		c.owned[id] = append(c.owned[id], key)
	case "g":
		v = new(ledger.ModelCall)
		c.owned[id] = append(c.owned[id], key)
	case "n":
		v = new(ledger.Note)
	case "p":
		v = new(ledger.Provenance)
	case "B":
		b := new(blob.Meta)
		c.blobs[id], v = b, b
	case "b":
		c.chunks[id]++
	case "a":
		c.active = append(c.active, id)
	}
	if v != nil {
		if err := json.Unmarshal(val, v); err != nil {
			c.add("record", key, "does not decode: %v", err)
		}
	}
}

// checkActive: every task marked runnable has a record that says so.
func (c *scrubbed) checkActive() {
	for _, id := range c.active {
		t, ok := c.tasks[id]
		switch {
		case !ok:
			c.add("invariant", string(kv.ActiveKey(id)), "task is marked runnable but has no task record")
		case !t.Status.Runnable():
			c.add("invariant", string(kv.ActiveKey(id)), "task is marked runnable but its record says %s", t.Status)
		}
	}
}

// checkSteps: every task has as many step records as it has steps.
func (c *scrubbed) checkSteps() {
	for id, t := range c.tasks {
		if t.Partial != nil && c.stepRecs[id] != t.StepCount() {
			c.add("invariant", string(kv.TaskKey(id)), "task has %d steps but %d step records", t.StepCount(), c.stepRecs[id])
		}
	}
}

// checkOwned: every step, unit and journal record belongs to a task that
// exists.
func (c *scrubbed) checkOwned() {
	for _, id := range slices.Sorted(maps.Keys(c.owned)) {
		if _, ok := c.tasks[id]; !ok {
			c.add("invariant", c.owned[id][0], "%d step, unit or effect journal records belong to task %s, which has no task record", len(c.owned[id]), id)
		}
	}
}

// checkBlobs: blobs (modules, artifacts, replay sets) are whole.
func (c *scrubbed) checkBlobs() {
	for _, sum := range slices.Sorted(maps.Keys(c.blobs)) {
		if n := c.chunks[sum]; n != c.blobs[sum].Chunks {
			c.add("invariant", string(kv.BlobKey(sum)), "blob has %d of its %d chunks", n, c.blobs[sum].Chunks)
		}
	}
}

// checkReplaySets: every replay set a manifest pins is there with all its
// recordings.
func (c *scrubbed) checkReplaySets(replayIndex func(string) (ledger.ReplayIndex, error)) {
	for _, id := range slices.Sorted(maps.Keys(c.manifests)) {
		rp := c.manifests[id].ModelReplay
		if rp == nil {
			continue
		}
		if c.blobs[rp.SHA256] == nil {
			c.add("invariant", string(kv.ManifestKey(id)), "the replay set %s the manifest pins is not in the store", rp.SHA256)
			continue
		}
		idx, err := replayIndex(rp.SHA256)
		if err != nil {
			c.add("invariant", string(kv.ManifestKey(id)), "the replay set %s the manifest pins: %s", rp.SHA256, filecheck.FirstLine(err))
			continue
		}
		missing := 0
		for _, file := range idx {
			if c.blobs[file] == nil {
				missing++
			}
		}
		if missing > 0 {
			c.add("invariant", string(kv.ManifestKey(id)), "%d of the %d recordings of replay set %s are not in the store", missing, len(idx), rp.SHA256)
		}
	}
}
