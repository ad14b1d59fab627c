//go:build unix

// Package diskfree tells how much space a file system has left for this
// user: the store's free-space floor and the workspace's reserve both ask
// it.
package diskfree

import (
	"fmt"
	"syscall"
)

// Bytes returns the space of dir's file system available to this user.
func Bytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
