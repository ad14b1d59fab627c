package main

import (
	"strings"
	"testing"
)

// TestSet: the key's line is replaced, its indentation kept, and the diff
// names that line; a missing, repeated or unchanged key is an error.
func TestSet(t *testing.T) {
	t.Parallel()
	text := "service: shop\nclient:\n  client_version: \"1.4.2\"\n  timeout: 5s\n"
	got, diff, err := set(text, "deploy.yaml", "client_version", "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if want := "service: shop\nclient:\n  client_version: \"2.0.0\"\n  timeout: 5s\n"; got != want {
		t.Errorf("text: got %q, want %q", got, want)
	}
	if want := "--- a/deploy.yaml\n+++ b/deploy.yaml\n@@ -3 +3 @@\n-  client_version: \"1.4.2\"\n+  client_version: \"2.0.0\"\n"; diff != want {
		t.Errorf("diff: got %q, want %q", diff, want)
	}
	for _, tc := range []struct{ text, err string }{
		{"service: shop\n", "has no line setting client_version"},
		{"client_version: 1\nclient_version: 2\n", "on lines 1 and 2"},
		{"client_version: \"2.0.0\"", "already sets"},
	} {
		if _, _, err := set(tc.text, "deploy.yaml", "client_version", "2.0.0"); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: got %v, want %q", tc.text, err, tc.err)
		}
	}
}
