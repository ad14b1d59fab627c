// Package header_test checks the C header lhengine.h against the constants
// the Go side defines: C cannot import them, so a test keeps the copies equal.
package header_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
	"github.com/lhengine/lhengine/plugins/sdk/go/abi"
)

// defines returns the integer #defines of lhengine.h by name.
func defines(t *testing.T, src []byte) map[string]int64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^#define (LHENGINE_[A-Z0-9_]+) \(?(-?[0-9]+)(?: << ([0-9]+))?\)?`)
	out := map[string]int64{}
	for _, m := range re.FindAllSubmatch(src, -1) {
		v, err := strconv.ParseInt(string(m[2]), 10, 64)
		if err != nil {
			t.Fatalf("#define %s: %v", m[1], err)
		}
		if len(m[3]) > 0 {
			shift, _ := strconv.Atoi(string(m[3]))
			v <<= shift
		}
		out[string(m[1])] = v
	}
	return out
}

func TestHeaderMatchesABI(t *testing.T) {
	src, err := os.ReadFile("lhengine.h")
	if err != nil {
		t.Fatal(err)
	}
	defs := defines(t, src)
	want := map[string]int64{
		"LHENGINE_ABI":               abi.Version,
		"LHENGINE_LOG_MAX":           sdk.LogMax,
		"LHENGINE_CALL_REQUEST_MAX":  sdk.CallRequestMax,
		"LHENGINE_ARTIFACT_META_MAX": sdk.ArtifactMetaMax,
		"LHENGINE_ARTIFACT_DATA_MAX": sdk.ArtifactDataMax,
		"LHENGINE_DEBUG":             int64(sdk.LevelDebug),
		"LHENGINE_INFO":              int64(sdk.LevelInfo),
		"LHENGINE_WARN":              int64(sdk.LevelWarn),
		"LHENGINE_ERROR":             int64(sdk.LevelError),
		"LHENGINE_ERR_RANGE":         int64(sdk.ErrRange),
		"LHENGINE_ERR_TOO_LARGE":     int64(sdk.ErrTooLarge),
		"LHENGINE_ERR_INVALID":       int64(sdk.ErrInvalid),
		"LHENGINE_ERR_DENIED":        int64(sdk.ErrDenied),
		"LHENGINE_ERR_NOT_FOUND":     int64(sdk.ErrNotFound),
		"LHENGINE_ERR_LEASE_LOST":    int64(sdk.ErrLeaseLost),
		"LHENGINE_ERR_BUDGET":        int64(sdk.ErrBudget),
		"LHENGINE_ERR_UNAVAILABLE":   int64(sdk.ErrUnavailable),
		"LHENGINE_ERR_INTERNAL":      int64(sdk.ErrInternal),
		"LHENGINE_ERR_PAUSED":        int64(sdk.ErrPaused),
	}
	for name, v := range want {
		got, ok := defs[name]
		if !ok {
			t.Errorf("lhengine.h has no #define %s", name)
			continue
		}
		if got != v {
			t.Errorf("lhengine.h: %s is %d, the Go side says %d", name, got, v)
		}
	}

	mods := regexp.MustCompile(`import_module\("([^"]*)"\)`).FindAllSubmatch(src, -1)
	if len(mods) == 0 {
		t.Fatal("lhengine.h names no import_module")
	}
	for _, m := range mods {
		if string(m[1]) != abi.HostModule {
			t.Errorf("lhengine.h imports from %q, want abi.HostModule %q", m[1], abi.HostModule)
		}
	}
}
