//go:build unix

package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/store/internal/kv"
	"github.com/lhengine/lhengine/store/internal/logsync"
)

// BenchmarkSyncFloors: what making a small write durable costs on this
// disk, by the way it is written (docs/BENCHMARKS.md, "A unit beside its
// commit's sync"):
//
//   - rewrite: 4 KiB written over an allocated block, then fsync (the
//     floor `lhengine bench` reports as fsync);
//   - append-mapped: 3,000 bytes appended through a shared mapping of a
//     sparse file, then fdatasync (what a memtable log does);
//   - store: a small durable store transaction and the store's own sync;
//   - badger-db-sync: the same transaction made durable by badger's DB.Sync;
//   - idle-vlog: fdatasync of a value log nothing was written to.
func BenchmarkSyncFloors(b *testing.B) {
	b.Run("rewrite", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "f"))
		require.NoError(b, err)
		defer f.Close()
		block := make([]byte, 4096)
		_, err = f.Write(block)
		require.NoError(b, err)
		require.NoError(b, f.Sync())
		b.ResetTimer()
		for range b.N {
			_, err := f.WriteAt(block, 0)
			require.NoError(b, err)
			require.NoError(b, f.Sync())
		}
	})
	b.Run("append-mapped", func(b *testing.B) {
		const size = 32 << 20
		f, err := os.Create(filepath.Join(b.TempDir(), "f"))
		require.NoError(b, err)
		defer f.Close()
		require.NoError(b, f.Truncate(size))
		m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		require.NoError(b, err)
		defer syscall.Munmap(m)
		rec := make([]byte, 3000)
		off := 0
		b.ResetTimer()
		for range b.N {
			if off+len(rec) > size {
				off = 0
			}
			off += copy(m[off:], rec)
			require.NoError(b, logsync.Datasync(f))
		}
	})
	durable := func(b *testing.B, s *Store, i int) {
		require.NoError(b, s.update(context.Background(), func(t *kv.Tx) error {
			t.Durable = true
			return t.Put(fmt.Appendf(nil, "x/%d", i), make([]byte, 512))
		}))
	}
	b.Run("store", func(b *testing.B) {
		s, err := Open(b.TempDir(), Options{})
		require.NoError(b, err)
		defer s.Close()
		b.ResetTimer()
		for i := range b.N {
			durable(b, s, i)
		}
	})
	b.Run("badger-db-sync", func(b *testing.B) {
		s, err := Open(b.TempDir(), Options{NoSync: true})
		require.NoError(b, err)
		defer s.Close()
		b.ResetTimer()
		for i := range b.N {
			durable(b, s, i)
			require.NoError(b, s.db.Sync())
		}
	})
	b.Run("idle-vlog", func(b *testing.B) {
		dir := b.TempDir()
		s, err := Open(dir, Options{})
		require.NoError(b, err)
		defer s.Close()
		durable(b, s, 0)
		vlogs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
		require.NoError(b, err)
		require.NotEmpty(b, vlogs)
		f, err := os.Open(vlogs[len(vlogs)-1])
		require.NoError(b, err)
		defer f.Close()
		b.ResetTimer()
		for range b.N {
			require.NoError(b, logsync.Datasync(f))
		}
	})
}
