//go:build !linux

package logsync

import "os"

// Datasync writes the file's data to disk (fsync where fdatasync is not
// available).
func Datasync(f *os.File) error { return f.Sync() }
