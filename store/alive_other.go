//go:build !unix

package store

// processAlive cannot tell here: a process is taken for alive until it is
// not seen for three beats.
func processAlive(int) bool { return true }
