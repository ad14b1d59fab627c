//go:build !linux

package benchrun

// inMemory reports whether dir is on a file system held in memory; it is
// only known on Linux.
func inMemory(string) bool { return false }
