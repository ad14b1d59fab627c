package taskfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Every file a task names (the task file, its plugins, prompts, policy
// files, recordings) is read through OpenRegular: the kind is judged on
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
	f, err := OpenRegular(path)
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
func HashFile(path string) (string, error) {
	f, err := OpenRegular(path)
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
