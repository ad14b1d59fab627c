package hostcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
)

// ReadReplayDir reads the recordings of dir (its *.json files; other files
// and folders are left alone) into a replay set, checking that each is a
// recording of the request its name says. A folder with no recordings, a
// file that is not one, and recordings of more than store.MaxReplayBytes
// in all are errors naming the folder or file.
func ReadReplayDir(dir string) (*ledger.ReplaySet, error) {
	return ReadReplayFrom(taskfile.OSFiles{}, dir)
}

// ReadReplayFrom is ReadReplayDir reading the folder through files.
func ReadReplayFrom(files taskfile.Files, dir string) (*ledger.ReplaySet, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	entries, err := files.ReadDir(abs)
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
		b, ok, err := readRegular(files, path, ledger.MaxReplayBytes-total)
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
func readRegular(files taskfile.Files, path string, max int64) (b []byte, ok bool, err error) {
	b, err = taskfile.ReadFrom(files, path, max)
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
