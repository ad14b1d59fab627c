package live

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
)

// TestCompileLineOnATerminal: while a submission's plugins load, a
// terminal shows which are compiling, how many are ready and for how long,
// and the line is gone when the submission returns; elsewhere nothing is
// written.
func TestCompileLineOnATerminal(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := NewCompile(&out, func() time.Time { return now })
	p.tty = true
	p.Event(engine.CompileEvent{Plugin: "/t/draft.wasm", Size: 3_462_232})
	now = now.Add(2 * time.Second)
	p.Event(engine.CompileEvent{Plugin: "/t/verify.wasm", Size: 3_466_483})
	now = now.Add(3 * time.Second)
	p.tick()
	p.Event(engine.CompileEvent{Plugin: "/t/draft.wasm", Size: 3_462_232, Done: true})
	p.Finish()
	require.Equal(t, "\r\033[Kloading plugins: 0/1 ready · compiling draft.wasm (3.5 MB) · 0s"+
		"\r\033[Kloading plugins: 0/2 ready · compiling draft.wasm (3.5 MB), verify.wasm (3.5 MB) · 2s"+
		"\r\033[Kloading plugins: 0/2 ready · compiling draft.wasm (3.5 MB), verify.wasm (3.5 MB) · 5s"+
		"\r\033[Kloading plugins: 1/2 ready · compiling verify.wasm (3.5 MB) · 5s"+
		"\r\033[K", out.String())

	out.Reset()
	p = NewCompile(&out, time.Now)
	p.Event(engine.CompileEvent{Plugin: "/t/draft.wasm", Size: 1})
	p.tick()
	p.Finish()
	require.Empty(t, out.String(), "not a terminal")
}
