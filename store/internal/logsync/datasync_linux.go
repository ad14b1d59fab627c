package logsync

import (
	"errors"
	"os"
	"syscall"
)

// Datasync writes the file's data and what is needed to read it back
// (fdatasync), as Badger's msync of the file's mapping does.
func Datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
