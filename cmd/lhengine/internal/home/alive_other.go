//go:build !unix

package main

// alive cannot tell here: assume the process exists.
func alive(int) bool { return true }
