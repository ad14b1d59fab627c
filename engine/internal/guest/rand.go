package guest

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
)

// Seed is the seed of an attempt's random_get stream: the sha256 of what
// identifies the attempt in its request (task id, step name, fan-out item
// index or -1 for a step that does not fan out, attempt number, repair
// count). Every work unit, and every attempt of it, gets bytes of its own,
// so identifiers a plugin makes do not collide across units and tasks; a
// replay of the same attempt gets the same bytes (specs/abi.md, "Clocks
// and randomness").
func Seed(req Request) [32]byte {
	item, repairs := -1, 0
	if req.Item != nil {
		item = req.Item.Index
	}
	if req.Repair != nil {
		repairs = req.Repair.Count
	}
	h := sha256.New()
	h.Write([]byte("lhengine random_get v1\x00"))
	h.Write([]byte(req.TaskID))
	h.Write([]byte{0})
	h.Write([]byte(req.Step))
	h.Write([]byte{0})
	var b [8]byte
	for _, n := range []int{item, req.Attempt, repairs} {
		binary.BigEndian.PutUint64(b[:], uint64(int64(n)))
		h.Write(b[:])
	}
	var s [32]byte
	h.Sum(s[:0])
	return s
}

// fakeRand is the deterministic source behind a guest's random_get: a
// ChaCha8 stream keyed by the attempt's Seed, made on the first read.
type fakeRand struct {
	seed [32]byte
	src  *rand.ChaCha8
}

func (r *fakeRand) Read(p []byte) (int, error) {
	if r.src == nil {
		r.src = rand.NewChaCha8(r.seed)
	}
	return r.src.Read(p)
}
