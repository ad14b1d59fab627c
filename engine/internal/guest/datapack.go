package guest

import (
	"bytes"
	"context"
	"errors"

	"github.com/tetratelabs/wazero"

	"github.com/lhengine/lhengine/engine/internal/guest/linmem"
)

// Instantiating a module applies each of its active data segments one by
// one, and wazero's cost per segment (evaluating its offset, bookkeeping)
// dwarfs the copy for small ones. Go's linker emits tens of thousands of
// small segments (about 38,000 for a small plugin), which made applying
// them about a third of a Go plugin's instantiation. packData rewrites the
// data section at load time into a few segments giving the memory exactly
// the same initial contents.
//
// The rewrite is only done when it is plainly equivalent: every segment is
// active, in memory 0, at a constant i32 offset, and inside the module's
// initial memory (so instantiation cannot fail part way), and the module
// has no data count section, which any use of memory.init or data.drop
// (the only things that can tell segments apart) requires. Anything else,
// and anything the reader does not understand, leaves the module as it is.

const (
	packMinSegments = 16       // fewer are not worth a rewrite
	packMaxImage    = 64 << 20 // the most initialised memory packed
	packZeroGap     = 4 << 10  // zero runs this long split segments
)

var errNoPack = errors.New("data section not packable")

// packData returns wasm with its data section packed, and whether it did.
// wasm must be a module scanSections accepted; memMin is its memory's
// initial size in pages.
func packData(wasm []byte, memMin uint32) ([]byte, bool) {
	if len(wasm) < 8 {
		return nil, false
	}
	r := &reader{b: wasm, off: 8}
	dataStart, dataEnd := -1, -1
	var body []byte
	for r.off < len(r.b) {
		start := r.off
		id, err := r.byte()
		if err != nil {
			return nil, false
		}
		size, err := r.u32()
		if err != nil {
			return nil, false
		}
		b, err := r.bytes(size)
		if err != nil {
			return nil, false
		}
		switch id {
		case 12: // data count: memory.init or data.drop may be used
			return nil, false
		case 11:
			dataStart, dataEnd, body = start, r.off, b
		}
	}
	if dataStart < 0 {
		return nil, false
	}
	packed, err := packSegments(body, uint64(memMin)*linmem.PageSize)
	if err != nil {
		return nil, false
	}
	out := make([]byte, 0, len(wasm))
	out = append(out, wasm[:dataStart]...)
	out = append(out, 11)
	out = appendU32(out, uint32(len(packed)))
	out = append(out, packed...)
	out = append(out, wasm[dataEnd:]...)
	return out, true
}

// packSegments returns the packed body of a data section.
func packSegments(body []byte, memBytes uint64) ([]byte, error) {
	s := &reader{b: body}
	count, err := s.u32()
	if err != nil || count < packMinSegments {
		return nil, errNoPack
	}
	type segment struct {
		off  uint64
		init []byte
	}
	segs := make([]segment, 0, count)
	lo, hi := uint64(1<<63), uint64(0)
	for range count {
		flags, err := s.u32()
		if err != nil {
			return nil, err
		}
		switch flags {
		case 0:
		case 2: // active with an explicit memory index
			if mem, err := s.u32(); err != nil || mem != 0 {
				return nil, errNoPack
			}
		default: // passive
			return nil, errNoPack
		}
		// The offset must be exactly "i32.const N; end".
		if op, err := s.byte(); err != nil || op != 0x41 {
			return nil, errNoPack
		}
		v, err := s.s32()
		if err != nil {
			return nil, err
		}
		if end, err := s.byte(); err != nil || end != 0x0b {
			return nil, errNoPack
		}
		n, err := s.u32()
		if err != nil {
			return nil, err
		}
		init, err := s.bytes(n)
		if err != nil {
			return nil, err
		}
		off := uint64(uint32(v)) // wazero reads the offset as unsigned
		if off+uint64(n) > memBytes {
			return nil, errNoPack // instantiation fails: keep how it fails
		}
		segs = append(segs, segment{off, init})
		if n > 0 {
			lo, hi = min(lo, off), max(hi, off+uint64(n))
		}
	}
	if s.off != len(body) {
		return nil, errNoPack
	}
	if hi <= lo || hi-lo > packMaxImage {
		return nil, errNoPack
	}
	// The initial contents, in segment order: a later segment overwrites
	// an earlier one, as instantiation does.
	image := make([]byte, hi-lo)
	for _, sg := range segs {
		copy(image[sg.off-lo:], sg.init)
	}
	// One segment per run of non-zero bytes, runs closer than packZeroGap
	// joined; what no segment covers is zero in a fresh memory anyway.
	var runs [][2]int
	for i := 0; i < len(image); {
		if image[i] == 0 {
			i++
			continue
		}
		end := i + 1
		for end < len(image) {
			if image[end] != 0 {
				end++
				continue
			}
			z := end
			for z < len(image) && z-end < packZeroGap && image[z] == 0 {
				z++
			}
			if z == len(image) || z-end >= packZeroGap {
				break
			}
			end = z
		}
		runs = append(runs, [2]int{i, end})
		i = end
	}
	if uint32(len(runs)) >= count {
		return nil, errNoPack
	}
	var out bytes.Buffer
	out.Grow(len(image) + 16*len(runs))
	b := appendU32(nil, uint32(len(runs)))
	for _, run := range runs {
		b = append(b, 0, 0x41)
		b = appendS32(b, int32(uint32(lo+uint64(run[0]))))
		b = append(b, 0x0b)
		b = appendU32(b, uint32(run[1]-run[0]))
		out.Write(b)
		out.Write(image[run[0]:run[1]])
		b = b[:0]
	}
	return out.Bytes(), nil
}

// s32 reads a signed LEB128 i32.
func (r *reader) s32() (int32, error) {
	var v int64
	var shift uint
	for {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift == 28 && c&0x80 != 0 {
			return 0, errors.New("bad LEB128")
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			if v < -1<<31 || v > 1<<31-1 {
				return 0, errors.New("bad LEB128")
			}
			return int32(v), nil
		}
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func appendS32(b []byte, v int32) []byte {
	x := int64(v)
	for {
		c := byte(x & 0x7f)
		x >>= 7
		if x == 0 && c&0x40 == 0 || x == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// compilePacked compiles wasm with its data section packed when packData
// can, and as given otherwise, or when the packed module fails to compile:
// errors are always about the module itself.
func compilePacked(ctx context.Context, rt wazero.Runtime, wasm []byte) (wazero.CompiledModule, error) {
	if sec, err := scanSections(wasm); err == nil {
		if packed, ok := packData(wasm, sec.memMin); ok {
			if compiled, err := compile(ctx, rt, packed); err == nil {
				return compiled, nil
			}
		}
	}
	return compile(ctx, rt, wasm)
}
