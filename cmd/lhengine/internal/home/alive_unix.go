//go:build unix

package home

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// alive reports whether a process with this id runs (it may belong to
// another user). A process that has exited but not been reaped by its
// parent (a zombie, which holds no file, lock or socket) is not alive;
// where /proc is missing, a zombie counts as alive.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}
