package main

import (
	"strings"
	"testing"
)

// TestBalanced: brackets are matched outside literals and comments, and an
// unmatched one is named with its line.
func TestBalanced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, err string }{
		{"func f() { g(a[1]) }\n", ""},
		{"s := \"{(\" + `[\n` + '}' // )\n/* ] */\n", ""},
		{"s := \"a\\\"{\"\n", ""},
		{"func f() {\n\tg(\n}\n", "line 3: } closes the ( of line 2"},
		{"func f() {\n", "line 1: { is never closed"},
		{")\n", "line 1: ) closes nothing"},
		{"s := \"open\n", "line 1: literal not closed"},
		{"/* open\n", "line 1: comment not closed"},
	} {
		err := balanced([]byte(tc.src))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.src, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: got %v, want %q", tc.src, err, tc.err)
		}
	}
}
