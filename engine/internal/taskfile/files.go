package taskfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Files is where a submission's files are read: the task file, its
// plugins, prompts, the policy files on its search path and the
// recordings of its replay set. OSFiles reads the local disk; a server
// submitting what a remote client uploaded reads the client's bundle
// instead, and a client preparing an upload records what it reads
// (engine/upload.go). Paths are absolute and clean.
//
// Mount sources and the files facts read are not submission files: they
// name the disk of the machine that runs the task and are always read
// there (CheckMounts).
type Files interface {
	// Open opens the regular file at path for reading, refusing any other
	// kind with an error IsNotRegular recognises, and a path it does not
	// have with one that wraps fs.ErrNotExist.
	Open(path string) (io.ReadCloser, error)
	// ReadDir lists the directory at path, sorted by name: an error
	// wrapping fs.ErrNotExist when there is none.
	ReadDir(path string) ([]fs.DirEntry, error)
}

// MountChecker is implemented by Files that say whether mount sources are
// checked where the submission is read (Task's checks at parse): the OS
// and a server's bundle check them on their own disk; a client preparing
// an upload for a server does not, since they name the server's disk.
type MountChecker interface {
	ChecksMounts() bool
}

// ChecksMounts reports whether mount sources are checked when files reads
// a submission: true unless files says otherwise (MountChecker).
func ChecksMounts(files Files) bool {
	if m, ok := files.(MountChecker); ok {
		return m.ChecksMounts()
	}
	return true
}

// OSFiles reads the local disk, through OpenRegular.
type OSFiles struct{}

// Open is OpenRegular.
func (OSFiles) Open(path string) (io.ReadCloser, error) { return OpenRegular(path) }

// ReadDir is os.ReadDir.
func (OSFiles) ReadDir(path string) ([]fs.DirEntry, error) { return os.ReadDir(path) }

// orOS is files, or OSFiles when it is nil.
func orOS(files Files) Files {
	if files == nil {
		return OSFiles{}
	}
	return files
}

// Every file a task names (the task file, its plugins, prompts, policy
// files, recordings) is read through Files, on the local disk through
// OpenRegular: the kind is judged on
// the descriptor that is then read, so nothing swapped in after a look is
// read instead, and the open does not wait for a writer, so a FIFO in a
// file's place cannot stall a submit (or the process that owns a home).

var errNotRegular = errors.New("not a regular file")

// OpenRegular opens the file at path for reading if it is a regular file,
// and fails with an error saying so otherwise.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = errNotRegular
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// IsNotRegular reports whether err is OpenRegular's refusal of a file that
// is not a regular one.
func IsNotRegular(err error) bool { return errors.Is(err, errNotRegular) }

// ErrTooLarge: ReadRegular found more than it may read.
var ErrTooLarge = errors.New("too large")

// ReadRegular reads the regular file at path, refusing (ErrTooLarge) one of
// more than max bytes before holding more than that.
func ReadRegular(path string, max int64) ([]byte, error) {
	return ReadFrom(OSFiles{}, path, max)
}

// ReadFrom is ReadRegular reading through files (nil: the local disk).
func ReadFrom(files Files, path string, max int64) ([]byte, error) {
	f, err := orOS(files).Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, max)
	}
	return b, nil
}

// HashFile returns the lower-case hex sha256 of the regular file at path.
func HashFile(path string) (string, error) { return HashFrom(OSFiles{}, path) }

// HashFrom is HashFile reading through files (nil: the local disk).
func HashFrom(files Files, path string) (string, error) {
	f, err := orOS(files).Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
