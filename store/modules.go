package store

// Plugin modules are pinned by keeping their bytes in the store, in the
// content-addressed blob table that holds artifacts and replay sets too
// (internal/blob): a module that a thousand tasks pin is stored once, and a
// task runs from the bytes it was submitted with whatever happens to the
// file afterwards. Submit stores them before the task record that pins them.

// Module returns the bytes of the plugin module pinned with sha256 sum
// (lower-case hex), verified against it. It returns an error wrapping
// ErrNotFound when the store does not hold the module: tasks submitted by
// engines that did not keep module bytes pin only a path.
func (s *Store) Module(sum string) ([]byte, error) { return s.blobs.Module(sum) }
