//go:build !unix

// Package diskfree tells how much space a file system has left for this
// user: the store's free-space floor and the workspace's reserve both ask
// it.
package diskfree

import "math"

// Bytes does not know the free space here: it reports no limit, so floors
// and reserves are not enforced.
func Bytes(string) (int64, error) { return math.MaxInt64, nil }
