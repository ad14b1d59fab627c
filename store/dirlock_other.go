//go:build !unix

package store

// dirLock is a no-op where flock is not available: Badger's own directory
// lock, taken at badger.Open, is the only one.
type dirLock struct{}

func lockStore(string, bool) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) release() {}

// privateStore does nothing where file modes do not say who may read a
// file (Windows keeps access in ACLs, which the store leaves as they are).
func privateStore(string) (bool, error) { return false, nil }
