package api_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAPIIsALeaf: the wire contract imports nothing of lhengine and none of
// the engine's dependencies, so a program that uses api.Client links
// neither the store (Badger), the runtime (wazero) nor the task language
// (HCL).
func TestAPIIsALeaf(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Equal(t, []string{"github.com/lhengine/lhengine/api"}, deps,
		"api may import the standard library only")
}
