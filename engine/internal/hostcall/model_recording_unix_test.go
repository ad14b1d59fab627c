//go:build unix

package hostcall

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/ledger"
)

// TestReadReplayDirHostileFiles: a FIFO named like a recording is passed
// over without waiting for a writer, and recordings past the size limit
// are refused by what would be read, before it is held in memory.
func TestReadReplayDirHostileFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sum := strings.Repeat("ab", 32)
	rec := fmt.Sprintf(`{"request_sha256": %q, "provider": "openai", "model_id": "m", "response": {"text": "hi"}}`, sum)
	require.NoError(t, os.WriteFile(filepath.Join(dir, sum+".json"), []byte(rec), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, strings.Repeat("ef", 32)+".json"), 0o644))
	set, err := ReadReplayDir(dir)
	require.NoError(t, err, "the FIFO is not a recording, and nobody writes to it")
	require.Equal(t, 1, set.Pin().Recordings)

	big := filepath.Join(dir, strings.Repeat("cd", 32)+".json")
	require.NoError(t, os.WriteFile(big, nil, 0o644))
	require.NoError(t, os.Truncate(big, ledger.MaxReplayBytes)) // sparse: no disk
	_, err = ReadReplayDir(dir)
	require.ErrorContains(t, err, "takes it past the limit")
}
