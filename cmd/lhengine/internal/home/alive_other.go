//go:build !unix

package home

// alive cannot tell here: assume the process exists.
func alive(int) bool { return true }
