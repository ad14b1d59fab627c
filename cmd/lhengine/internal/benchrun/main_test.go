package benchrun

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// One wazero runtime before the parallel tests: wazero caches its
	// version string without a lock when the first runtime is built (see
	// newRuntimeMu).
	ctx := context.Background()
	if err := wazero.NewRuntime(ctx).Close(ctx); err != nil {
		panic(err)
	}
	goleak.VerifyTestMain(m)
}
