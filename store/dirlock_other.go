//go:build !unix

package store

// dirLock is a no-op where flock is not available: Badger's own directory
// lock, taken at badger.Open, is the only one.
type dirLock struct{}

func lockStore(string, bool) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) release() {}
