//go:build !unix

package confine

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Without O_NOFOLLOW and the *at calls, the walk checks each element with
// os.Root.Lstat and then uses it by name beneath the root: a link swapped
// in between can make the write land elsewhere beneath dir (os.Root keeps
// it from leaving dir), and the directory is not synced after the rename.

func checkWrite(dir string, elems []string) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return walkRoot(r, elems, false)
}

func walkRoot(r *os.Root, elems []string, create bool) error {
	for i := range elems {
		name := path.Join(elems[:i+1]...)
		fi, err := r.Lstat(name)
		switch {
		case os.IsNotExist(err) && !create:
			return nil
		case os.IsNotExist(err) && i < len(elems)-1:
			if err := r.Mkdir(name, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			continue
		case os.IsNotExist(err):
			return nil
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s: %w", name, ErrSymlink)
		case i < len(elems)-1 && !fi.IsDir():
			return fmt.Errorf("%s: not a directory", name)
		case i == len(elems)-1 && fi.IsDir():
			return fmt.Errorf("%s: is a directory", name)
		}
	}
	return nil
}

func writeFile(dir string, elems []string, data []byte, perm fs.FileMode) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := walkRoot(r, elems, true); err != nil {
		return err
	}
	name := strings.Join(elems, "/")
	tmp := path.Join(path.Dir(name), tempName())
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	werr := writeSynced(f, data)
	if werr == nil {
		werr = r.Rename(tmp, name)
	}
	if werr != nil {
		r.Remove(tmp)
		return fmt.Errorf("writing %s: %w", name, werr)
	}
	return nil
}
