package guest

import (
	"math/rand"
	"sync"
)

// fakeRand is the deterministic source behind a guest's random_get
// (specs/abi.md: "a seeded source"). It yields exactly the bytes wazero's
// default source does, a math/rand source seeded with 42, without seeding
// one (a 5 KB table and about 10 µs) for every attempt: the first
// fakeRandShared bytes of the stream are computed once and shared, and only
// a guest that reads past them gets a source of its own. The byte stream of
// a math/rand Rand does not depend on how reads are split, so the two parts
// join up exactly.
type fakeRand struct {
	off int        // bytes of the shared prefix read
	src *rand.Rand // the stream past the prefix, once needed
}

// fakeRandSeed is wazero's seed for its default random source.
const fakeRandSeed = 42

const fakeRandShared = 1024

var fakeRandPrefix = sync.OnceValue(func() []byte {
	b := make([]byte, fakeRandShared)
	rand.New(rand.NewSource(fakeRandSeed)).Read(b)
	return b
})

func (r *fakeRand) Read(p []byte) (int, error) {
	n := 0
	if r.src == nil {
		prefix := fakeRandPrefix()
		n = copy(p, prefix[r.off:])
		r.off += n
		if n == len(p) {
			return n, nil
		}
		r.src = rand.New(rand.NewSource(fakeRandSeed))
		r.src.Read(make([]byte, len(prefix))) // skip what was shared
	}
	m, err := r.src.Read(p[n:])
	return n + m, err
}
