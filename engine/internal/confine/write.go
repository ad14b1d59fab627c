package confine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// ErrSymlink is the error WriteFile and CheckWrite return when an element
// of the path is a symbolic link: they follow none.
var ErrSymlink = errors.New("an element of the path is a symbolic link")

// elements splits name, a slash-separated path relative to the root, into
// its elements, refusing anything absolute, empty or climbing out.
func elements(name string) ([]string, error) {
	if name == "" || path.IsAbs(name) {
		return nil, fmt.Errorf("path %q is not a relative path beneath the directory", name)
	}
	clean := path.Clean(name)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, fmt.Errorf("path %q is not a relative path beneath the directory", name)
	}
	return strings.Split(clean, "/"), nil
}

// tempName is a fresh name for the temporary file of a write.
func tempName() string {
	var b [8]byte
	rand.Read(b[:])
	return ".write-" + hex.EncodeToString(b[:])
}

// WriteFile replaces the file name (slash-separated, relative to dir) with
// data, atomically: a temporary file in the same directory is written and
// synced, renamed over name, and the directory synced. Missing directories
// on the way are created (0o755), one at a time.
//
// No symbolic link is followed: an element of the path that is a link
// fails the write with ErrSymlink, and nothing is created beyond it. Each
// directory is opened relative to the one before it with O_NOFOLLOW, so a
// link swapped in while the write runs is refused too, never followed out
// of dir (on unix; see write_other.go elsewhere).
func WriteFile(dir, name string, data []byte, perm fs.FileMode) error {
	elems, err := elements(name)
	if err != nil {
		return err
	}
	return writeFile(dir, elems, data, perm)
}

// CheckWrite reports, changing nothing, whether WriteFile(dir, name, ...)
// would be refused by what is there now: an error wrapping ErrSymlink when
// an existing element of the path is a symbolic link, another error when
// one that must be a directory is not. Missing elements are fine.
func CheckWrite(dir, name string) error {
	elems, err := elements(name)
	if err != nil {
		return err
	}
	return checkWrite(dir, elems)
}

// writeSynced writes data to f, syncs it and closes it, returning the
// first error.
func writeSynced(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
