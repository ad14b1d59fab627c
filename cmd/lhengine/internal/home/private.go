package home

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/hashicorp/go-hclog"
)

// Private makes home dir owner-only (0700) whatever the umask, before
// this process looks into it: the store, workspaces and caches in it hold
// every task's outputs and files, and nothing inside a 0700 directory can
// be reached by another user, whatever its own mode (the store makes its
// files 0600 as well). create makes the home if it does not exist (its
// parents with the usual 0755). A home that was open to other users is
// closed, with a warning on log; a home this user may not enter is
// refused, saying why.
func Private(dir string, create bool, log hclog.Logger) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if !create {
			return nil // the engine says that there is no home
		}
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if fi, err = os.Stat(dir); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if d, err := os.Open(dir); errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("home %s: permission denied: a home is private to the user who created it", dir)
	} else if err == nil {
		d.Close()
	}
	if runtime.GOOS == "windows" || fi.Mode().Perm() == 0o700 {
		return nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		log.Warn("the home could not be made owner-only", "home", dir, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()), "error", err)
		return nil
	}
	if fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the home was open to other users; it is owner-only now (0700)", "home", dir, "was", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	return nil
}
