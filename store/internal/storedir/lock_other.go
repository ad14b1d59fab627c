//go:build !unix

package storedir

// Lock is a no-op where flock is not available: Badger's own directory
// lock, taken at badger.Open, is the only one.
type Lock struct{}

// Acquire takes no lock.
func Acquire(string, bool) (*Lock, error) { return &Lock{}, nil }

// Release does nothing.
func (*Lock) Release() {}

// Private does nothing where file modes do not say who may read a file
// (Windows keeps access in ACLs, which the store leaves as they are).
func Private(string) (bool, error) { return false, nil }
