package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnifiedDiff: hunks with three lines of context and the lines each
// side starts at; a side with no lines starts at 0.
func TestUnifiedDiff(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	a := strings.Split("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16", " ")
	c := strings.Split("1 2 x 4 5 6 7 8 9 10 11 12 13 14 16 17", " ")
	Unified(&b, "a", "b", a, c, 1, 1)
	require.Equal(t, `--- a
+++ b
@@ -1,6 +1,6 @@
 1
 2
-3
+x
 4
 5
 6
@@ -12,5 +12,5 @@
 12
 13
 14
-15
 16
+17
`, b.String())
	b.Reset()
	Unified(&b, "a", "b", nil, []string{"new"}, 1, 1)
	require.Equal(t, "--- a\n+++ b\n@@ -0,0 +1,1 @@\n+new\n", b.String())
}
