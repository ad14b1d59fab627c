package benchrun

import "golang.org/x/sys/unix"

// inMemory reports whether dir is on a file system held in memory (tmpfs,
// ramfs), where an fsync reaches no disk.
func inMemory(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}
