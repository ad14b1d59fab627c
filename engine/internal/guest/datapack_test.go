package guest

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// dataModule builds a module with one memory of memPages pages and the
// given raw data segments (each: flags, offset expression, init), plus a
// data count section when withCount.
func dataModule(memPages uint32, segs [][]byte, withCount bool) []byte {
	section := func(id byte, body []byte) []byte {
		return append(appendU32([]byte{id}, uint32(len(body))), body...)
	}
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(5, appendU32([]byte{1, 0}, memPages))...)
	if withCount {
		m = append(m, section(12, appendU32(nil, uint32(len(segs))))...)
	}
	body := appendU32(nil, uint32(len(segs)))
	for _, s := range segs {
		body = append(body, s...)
	}
	return append(m, section(11, body)...)
}

// activeSeg is an active segment of memory 0 at off.
func activeSeg(off int32, init []byte) []byte {
	b := appendS32([]byte{0, 0x41}, off)
	b = append(b, 0x0b)
	b = appendU32(b, uint32(len(init)))
	return append(b, init...)
}

// initialMemory instantiates wasm without running anything and returns
// its memory.
func initialMemory(t *testing.T, wasm []byte) []byte {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	// Modules needing WASI get it; the others ignore it.
	require.NoError(t, instantiateHostModules(ctx, rt))
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithStartFunctions().WithName(""))
	require.NoError(t, err)
	mem := mod.Memory()
	b, ok := mem.Read(0, mem.Size())
	require.True(t, ok)
	return append([]byte(nil), b...)
}

func TestPackDataEquivalent(t *testing.T) {
	var segs [][]byte
	// Overlapping segments, zero runs long and short, zero bytes
	// overwriting earlier ones, empty segments.
	for i := range 40 {
		init := []byte{byte(i + 1), 0, byte(i + 2), byte(i + 3)}
		segs = append(segs, activeSeg(int32(100+i*3), init))
	}
	segs = append(segs,
		activeSeg(20000, []byte("far away")),
		activeSeg(101, []byte{0, 0, 0}),
		activeSeg(5000, nil),
		activeSeg(65536-4, []byte{9, 9, 9, 9}),
		activeSeg(0x10000+2, append([]byte{7}, make([]byte, 5000)...)),
	)
	seg2 := append([]byte{2, 0}, activeSeg(30000, []byte("explicit memory 0"))[1:]...)
	segs = append(segs, seg2)
	wasm := dataModule(2, segs, false)
	packed, ok := packData(wasm, 2)
	require.True(t, ok)
	assert.Less(t, len(packed), len(wasm))
	assert.Equal(t, initialMemory(t, wasm), initialMemory(t, packed))
}

func TestPackDataGo(t *testing.T) {
	wasm, err := os.ReadFile(testwasm.GoGuest(t, "conformance"))
	require.NoError(t, err)
	sec, err := scanSections(wasm)
	require.NoError(t, err)
	packed, ok := packData(wasm, sec.memMin)
	require.True(t, ok, "a Go module's data section is packable")
	t.Logf("%d bytes, packed %d", len(wasm), len(packed))
	assert.Equal(t, initialMemory(t, wasm), initialMemory(t, packed))
}

func TestPackDataRefused(t *testing.T) {
	many := func(extra ...[]byte) [][]byte {
		var segs [][]byte
		for i := range 20 {
			segs = append(segs, activeSeg(int32(i*10), []byte{1}))
		}
		return append(segs, extra...)
	}
	for name, wasm := range map[string][]byte{
		"data count":    dataModule(1, many(), true),
		"passive":       dataModule(1, many([]byte{1, 1, 5}), false),
		"global offset": dataModule(1, many([]byte{0, 0x23, 0, 0x0b, 1, 5}), false),
		"out of bounds": dataModule(1, many(activeSeg(65535, []byte{1, 2})), false),
		"negative":      dataModule(1, many(activeSeg(-1, []byte{1})), false),
		"few segments":  dataModule(1, many()[:3], false),
	} {
		_, ok := packData(wasm, 1)
		assert.False(t, ok, name)
	}
}

func TestLEB(t *testing.T) {
	for _, v := range []int32{0, 1, -1, 63, 64, -64, -65, 1 << 20, -1 << 31, 1<<31 - 1} {
		r := &reader{b: appendS32(nil, v)}
		got, err := r.s32()
		require.NoError(t, err)
		assert.Equal(t, v, got)
		assert.Equal(t, len(r.b), r.off)
	}
}
