//go:build !unix

package testpg

import "os/exec"

// runAs does nothing where there is no root to step down from.
func runAs(*exec.Cmd, int, int) {}
