package abi_test

import (
	"strconv"
	"testing"

	"github.com/lhengine/lhengine/plugins/sdk/go/abi"
)

func TestHostModuleCarriesVersion(t *testing.T) {
	if want := "lhengine_v" + strconv.Itoa(abi.Version); abi.HostModule != want {
		t.Fatalf("HostModule is %q, want %q (the name carries the major version)", abi.HostModule, want)
	}
}
