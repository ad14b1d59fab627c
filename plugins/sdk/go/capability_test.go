package sdk_test

import (
	"encoding/json"
	"errors"
	"testing"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// TestCapabilitiesOffWasm: natively, every capability is unavailable, with
// the status and a message in a *HostError.
func TestCapabilitiesOffWasm(t *testing.T) {
	ctx := &sdk.Context{}
	check := func(name string, err error) {
		t.Helper()
		var he *sdk.HostError
		if !errors.As(err, &he) || he.Status != sdk.ErrUnavailable || he.Message == "" {
			t.Fatalf("%s: got %v, want a *HostError with ErrUnavailable", name, err)
		}
		if !errors.Is(err, sdk.ErrUnavailable) {
			t.Fatalf("%s: errors.Is(err, ErrUnavailable) is false", name)
		}
	}
	check("Call", ctx.Call("kv.get", map[string]string{"key": "k"}, nil))
	check("Effect", ctx.Effect("k", sdk.EffectFile, sdk.FileEffect{Path: "a", Content: "b"}, nil))
	_, err := ctx.Fetch(sdk.FetchRequest{URL: "http://example.test/"})
	check("Fetch", err)
	check("Count", ctx.Count("pages", 1))
	check("Note", ctx.Note(sdk.NoteFinding, "x"))
	_, err = ctx.KVGet("k", nil)
	check("KVGet", err)
	check("KVPut", ctx.KVPut("k", 1))
	_, err = ctx.PutArtifact("a.md", "text/markdown", []byte("# a"))
	check("PutArtifact", err)
	_, err = ctx.ReadArtifact("sha256:00")
	check("ReadArtifact", err)
	if err := ctx.Call("kv.get", func() {}, nil); err == nil || errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("unencodable request: got %v", err)
	}
	if _, err := ctx.PutArtifact("", "", nil); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("empty artifact name: got %v", err)
	}
	if !sdk.IsPaused(&sdk.HostError{Status: sdk.ErrPaused}) {
		t.Fatal("IsPaused")
	}
}

func TestFetchResponseBodyBytes(t *testing.T) {
	var r sdk.FetchResponse
	if err := json.Unmarshal([]byte(`{"status":200,"body_base64":"/w=="}`), &r); err != nil {
		t.Fatal(err)
	}
	b, err := r.BodyBytes()
	if err != nil || string(b) != "\xff" {
		t.Fatalf("got %q, %v", b, err)
	}
	r = sdk.FetchResponse{Body: "ok"}
	if b, _ := r.BodyBytes(); string(b) != "ok" {
		t.Fatalf("got %q", b)
	}
}
