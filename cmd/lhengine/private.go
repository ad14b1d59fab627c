package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// privateHome makes the home owner-only (0700) whatever the umask, before
// this process looks into it: the store, workspaces and caches in it hold
// every task's outputs and files, and nothing inside a 0700 directory can
// be reached by another user, whatever its own mode (the store makes its
// files 0600 as well). create makes the home if it does not exist (its
// parents with the usual 0755). A home that was open to other users is
// closed, with a warning; a home this user may not enter is refused,
// saying why.
func (a *app) privateHome(create bool) error {
	fi, err := os.Stat(a.home)
	if errors.Is(err, os.ErrNotExist) {
		if !create {
			return nil // the engine says that there is no home
		}
		if err := os.MkdirAll(filepath.Dir(a.home), 0o755); err != nil {
			return err
		}
		if err := os.Mkdir(a.home, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if fi, err = os.Stat(a.home); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if d, err := os.Open(a.home); errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("home %s: permission denied: a home is private to the user who created it", a.home)
	} else if err == nil {
		d.Close()
	}
	if runtime.GOOS == "windows" || fi.Mode().Perm() == 0o700 {
		return nil
	}
	if err := os.Chmod(a.home, 0o700); err != nil {
		a.logger().Warn("the home could not be made owner-only", "home", a.home, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()), "error", err)
		return nil
	}
	if fi.Mode().Perm()&0o077 != 0 {
		a.logger().Warn("the home was open to other users; it is owner-only now (0700)", "home", a.home, "was", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	return nil
}
