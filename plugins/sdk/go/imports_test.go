package sdk_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/lhengine/lhengine/plugins/sdk/go/abi"
)

// TestWasmImportsUseHostModule: a //go:wasmimport directive cannot name a
// constant, so the module name is spelled out in host_wasip1.go; it must be
// abi.HostModule.
func TestWasmImportsUseHostModule(t *testing.T) {
	src, err := os.ReadFile("host_wasip1.go")
	if err != nil {
		t.Fatal(err)
	}
	imports := regexp.MustCompile(`(?m)^//go:wasmimport (\S+) (\S+)$`).FindAllSubmatch(src, -1)
	if len(imports) == 0 {
		t.Fatal("host_wasip1.go has no //go:wasmimport directive")
	}
	for _, m := range imports {
		if string(m[1]) != abi.HostModule {
			t.Errorf("//go:wasmimport %s %s: module is not abi.HostModule %q", m[1], m[2], abi.HostModule)
		}
	}
}
