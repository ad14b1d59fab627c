//go:build !linux

package store

import "os"

// datasync writes the file's data to disk (fsync where fdatasync is not
// available).
func datasync(f *os.File) error { return f.Sync() }
