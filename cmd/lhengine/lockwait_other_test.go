//go:build !unix

package main

import "testing"

// waitUnlocked has nothing to wait for where the store takes no flock.
func waitUnlocked(*testing.T, string) {}
