//go:build !linux

package benchrun

import "time"

// loadAverages is only known on Linux.
func loadAverages() ([3]float64, bool) { return [3]float64{}, false }

// cpuSample is the machine's busy CPU time and this process's own; only
// known on Linux.
type cpuSample struct {
	busy, self time.Duration
	ok         bool
}

func sampleCPU() cpuSample { return cpuSample{} }

// selfCPU is only known on Linux.
func selfCPU() (time.Duration, bool) { return 0, false }
