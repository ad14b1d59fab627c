package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/fault"
	"github.com/lhengine/lhengine/ledger"
)

// FactPluginKey is the key under which a plugin fact's module is pinned in
// the run manifest's Plugins, beside the steps' (a step name never holds
// a colon).
func FactPluginKey(fact string) string { return "fact:" + fact }

// pinFactPlugins pins the module of every plugin fact of t in m.
func pinFactPlugins(files taskfile.Files, t *taskfile.Task, m *ledger.Manifest, sums map[string]string) error {
	for _, f := range factPlugins(t) {
		sum, ok := sums[f.ResolvedPath]
		if !ok {
			var err error
			if sum, err = taskfile.HashFrom(files, f.ResolvedPath); err != nil {
				return fmt.Errorf("fact %q: %w", f.Name, err)
			}
			sums[f.ResolvedPath] = sum
		}
		m.Plugins[FactPluginKey(f.Name)] = ledger.PluginPin{Path: f.ResolvedPath, SHA256: sum}
	}
	return nil
}

// factPlugins returns the plugin facts of t, in declaration order.
func factPlugins(t *taskfile.Task) []*taskfile.Fact {
	if t.Environment == nil {
		return nil
	}
	var out []*taskfile.Fact
	for _, f := range t.Environment.Facts {
		if f.Kind == taskfile.FactPlugin {
			out = append(out, f)
		}
	}
	return out
}

// RunFact runs the plugin p of fact f of task taskName and returns the
// fact's value: the plugin's output, the string itself when it is a JSON
// string, else its compact JSON text. The plugin runs as a step does, in
// a fresh instance under the default timeout and memory, with no
// capability (every host call is refused) and no file system; its request
// has step "fact:NAME", attempt 1, input null and no task id, so that the
// same world gives the same request at submit and before every unit.
func RunFact(ctx context.Context, p *guest.Plugin, taskName string, f *taskfile.Fact) (string, error) {
	req := guest.Request{TaskName: taskName, Step: FactPluginKey(f.Name), Attempt: 1}
	res, err := p.Run(ctx, req, guest.Limits{Timeout: taskfile.DefaultTimeout, MemoryBytes: taskfile.DefaultMemory}, nil)
	if err != nil {
		return "", err
	}
	if res.NeedsRepair {
		return "", fault.New(fault.PluginError, "a fact plugin cannot ask for repair (%s)", res.RepairReason)
	}
	var s string
	if strings.HasPrefix(string(res.Output), `"`) && json.Unmarshal(res.Output, &s) == nil {
		return s, nil
	}
	return string(res.Output), nil
}
