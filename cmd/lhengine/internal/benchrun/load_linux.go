package benchrun

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// loadAverages reads the 1, 5 and 15 minute load averages.
func loadAverages() ([3]float64, bool) {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out, false
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return out, false
	}
	for i := range out {
		if out[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return out, false
		}
	}
	return out, true
}

// cpuSample is the machine's busy CPU time and this process's own, at one
// moment.
type cpuSample struct {
	busy, self time.Duration
	ok         bool
}

// sampleCPU reads the busy time of all CPUs (/proc/stat) and this process's
// user and system time.
func sampleCPU() cpuSample {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	busy, err := parseStat(b)
	if err != nil {
		return cpuSample{}
	}
	self, ok := selfCPU()
	if !ok {
		return cpuSample{}
	}
	return cpuSample{busy: busy, self: self, ok: true}
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// parseStat reads the busy time of all CPUs from /proc/stat's first line
// (user nice system idle iowait irq softirq steal ...): everything but
// idle and iowait. Guest time is already counted in user.
func parseStat(b []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %.80q", line)
	}
	var busy uint64
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / clockTicks, nil
}

// selfCPU is this process's CPU time so far, user and system.
func selfCPU() (time.Duration, bool) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
