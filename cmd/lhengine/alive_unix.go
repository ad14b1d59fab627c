//go:build unix

package main

import (
	"errors"
	"syscall"
)

// alive reports whether a process with this id exists (it may belong to
// another user).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
