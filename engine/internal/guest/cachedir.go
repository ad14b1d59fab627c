package guest

import (
	"fmt"
	"os"
)

// prepareCacheDir makes dir fit to hold compiled modules: it creates it
// (and its parents) owner-only, narrows an existing one this user owns to
// 0700, and refuses one that is not a directory or that another user owns.
// The cache holds native code that every process using it runs: whoever
// may write it may run code as its users, so it is this user's alone.
// Processes share it safely: an entry is written to a temporary file and
// renamed into place (0600), so a reader sees a whole entry or none.
func prepareCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("compilation cache %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("compilation cache %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("compilation cache %s is not a directory", dir)
	}
	if !ownedByMe(fi) {
		return fmt.Errorf("compilation cache %s belongs to another user: it holds native code this process would run; "+
			"use a directory of your own (--cache DIR) or none (--cache off)", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("compilation cache %s: make it owner-only: %w", dir, err)
		}
	}
	return nil
}
