package guest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tetratelabs/wazero"
)

// repairCache is called when compiling wasm on a runtime with a
// compilation cache failed. wazero fails a compile whose cache entry it
// cannot read (a disk fault, a copy cut short) instead of compiling
// again, and the cache is shared by every home of the user: one bad entry
// would refuse the plugin everywhere until someone found the file.
//
// The entry's name is wazero's own hash of the module, its configuration
// and the CPU, so it is found by having wazero write it: the same bytes
// are compiled, as Run compiles them, on a runtime of the same
// configuration whose cache is an empty directory beside the shared one.
// If that compile fails too, the bytes are at fault and nothing changes.
// Otherwise every entry it wrote replaces (by rename, so a reader sees an
// old file or a new one) the entry of the same name in the shared cache,
// and repairCache reports how many it replaced: compile again.
func (r *Runtime) repairCache(ctx context.Context, wasm []byte) (replaced int, err error) {
	tmp, err := os.MkdirTemp(r.cacheDir, ".repair-*")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	newRuntimeMu.Lock() // see newRuntime
	cache, err := wazero.NewCompilationCacheWithDir(tmp)
	if err != nil {
		newRuntimeMu.Unlock()
		return 0, err
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCloseOnContextDone(r.closeOnContextDone).WithCompilationCache(cache))
	newRuntimeMu.Unlock()
	compiled, _, _, cerr := compileForRun(ctx, rt, wasm)
	if cerr == nil {
		compiled.Close(ctx)
	}
	err = errors.Join(rt.Close(ctx), cache.Close(ctx))
	if cerr != nil || err != nil {
		return 0, err
	}
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(tmp, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(r.cacheDir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		if err := os.Rename(p, dst); err != nil {
			return err
		}
		replaced++
		return nil
	})
	return replaced, err
}
