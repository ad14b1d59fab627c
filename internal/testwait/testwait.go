// Package testwait waits, in tests, for what a goroutine sends, with the
// test's deadline as the only bound: no sleeping.
package testwait

import (
	"context"
	"testing"
)

// Receive returns the next value of ch; when ctx ends first it fails the
// test, naming what it waited for.
func Receive[T any](t testing.TB, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
		panic("unreachable")
	}
}
