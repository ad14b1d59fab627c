package render

import (
	"fmt"
	"io"
	"time"

	"github.com/lhengine/lhengine/engine"
)

// PluginTestJSON is the -o json object of plugin test.
func PluginTestJSON(path, sum string, res *engine.PluginTestResult) map[string]any {
	result := map[string]any{}
	switch {
	case res.FailureKind != "":
		result["status"], result["kind"], result["message"] = "failed", res.FailureKind, res.FailureMessage
	case res.NeedsRepair:
		result["status"], result["reason"] = "needs_repair", res.RepairReason
	default:
		result["status"], result["output"] = "succeeded", res.Output
	}
	calls := res.HostCalls
	if calls == nil {
		calls = []engine.HostCall{}
	}
	return map[string]any{"plugin": path, "sha256": sum, "result": result, "log": res.Log, "host_calls": calls,
		"host_calls_made": res.HostCallsMade, "duration_ms": float64(res.Duration.Microseconds()) / 1000, "memory_bytes": res.MemoryBytes}
}

// PluginTest prints res for a person.
func PluginTest(w io.Writer, res *engine.PluginTestResult) {
	switch {
	case res.FailureKind != "":
		fmt.Fprintf(w, "result:   failed (%s)\nmessage:  %s\n", res.FailureKind, res.FailureMessage)
	case res.NeedsRepair:
		fmt.Fprintf(w, "result:   needs_repair\nreason:   %s\n", res.RepairReason)
	default:
		fmt.Fprintf(w, "result:   succeeded\noutput:\n%s\n", Indent(IndentJSON(res.Output), "  "))
	}
	if res.Log == "" {
		fmt.Fprintln(w, "log:      (none)")
	} else {
		fmt.Fprintf(w, "log:\n%s\n", Indent(res.Log, "  "))
	}
	fmt.Fprintf(w, "host calls: %d lhengine_v1 calls; capability calls:", res.HostCallsMade)
	if len(res.HostCalls) == 0 {
		fmt.Fprint(w, " (none)")
	} else if len(res.HostCalls) == engine.MaxRecordedHostCalls {
		fmt.Fprintf(w, " (the first %d)", engine.MaxRecordedHostCalls)
	}
	fmt.Fprintln(w)
	for _, c := range res.HostCalls {
		if c.Status == 0 {
			fmt.Fprintf(w, "  %s %s -> %s\n", c.Name, c.Request, c.Response)
		} else {
			fmt.Fprintf(w, "  %s %s -> %s (%d): %s\n", c.Name, c.Request, c.StatusName, c.Status, c.Message)
		}
	}
	fmt.Fprintf(w, "time:     %s\nmemory:   %d bytes (%.1f MiB)\n", res.Duration.Round(10*time.Microsecond), res.MemoryBytes, float64(res.MemoryBytes)/(1<<20))
}
