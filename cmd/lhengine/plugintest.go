package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/render"
	"github.com/lhengine/lhengine/engine"
)

// pluginTestCmd is `lhengine plugin test PLUGIN.wasm`: one attempt of a
// plugin outside any home, with what it did.
func (a *app) pluginTestCmd() *cobra.Command {
	var input, request string
	var policies, allow []string
	cmd := &cobra.Command{
		Use:   "test PLUGIN.wasm [--input JSON | --request FILE] [--policy K=V]... [--allow-http HOST]...",
		Short: "Run a plugin once, without a home, and show its result, log and host calls",
		Long: `Run PLUGIN.wasm once as a step would run it, without a home: in the same
sandbox, with the default step limits (60s, 64 MiB of memory), no workspace
and no model. It prints the result (the output; or the failure's kind and
message; or needs_repair and its reason), the plugin's log, every host call
it made with its arguments and the answer or the status it was refused
with, and the time and memory it used.

--input JSON is the step input (default null); --request FILE is a whole
request envelope instead (specs/abi.md §3; members it lacks take the
defaults: task "plugin-test", step "test", attempt 1). --policy K=V sets the
policy parameter K (V as JSON when it parses, else as a string), over the
envelope's. --allow-http HOST lets http.fetch and http effects reach HOST
(a host pattern, as in a step's http { allow = [...] }); without it both
are denied.

Calls that need a store (kv, artifacts, effects, progress, notes,
approval.request) are served by a throwaway store in a temporary folder
holding a task of one unit, removed at exit: no home is created or read.
Calls the sandbox refuses before they reach the host (an unknown capability,
a request that is not a JSON object) are counted, not listed. The plugin is
compiled in memory unless --cache or LHENGINE_CACHE names a directory.

Exit status: 0 when the plugin succeeded (or asked for repair), 1 when it
failed, 2 for a bad command line. -o json prints one object: {"plugin",
"sha256", "result": {"status": "succeeded"|"failed"|"needs_repair",
"output" | "kind", "message" | "reason"}, "log", "host_calls": [{"name",
"request", "response" | "status", "status_name", "message"}],
"host_calls_made", "duration_ms", "memory_bytes"}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t := engine.PluginTest{Name: filepath.Base(args[0]), AllowHTTP: allow}
			if input != "" && request != "" {
				return &exitError{code: exitUsage, err: fmt.Errorf("--input and --request exclude each other: the envelope holds the input")}
			}
			if input != "" {
				if !json.Valid([]byte(input)) {
					return &exitError{code: exitUsage, err: fmt.Errorf("invalid argument --input %q: not JSON", input)}
				}
				t.Input = json.RawMessage(input)
			}
			if request != "" {
				b, err := os.ReadFile(request)
				if err != nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("--request: %w", err)}
				}
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("--request %s: not a JSON object (a request envelope, specs/abi.md §3)", request)}
				}
				t.Request = b
			}
			if len(policies) > 0 {
				t.Policy = map[string]json.RawMessage{}
			}
			for _, kv := range policies {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return &exitError{code: exitUsage, err: fmt.Errorf("invalid argument --policy %q: want name=value", kv)}
				}
				if json.Valid([]byte(v)) {
					t.Policy[k] = json.RawMessage(v)
				} else {
					t.Policy[k], _ = json.Marshal(v)
				}
			}
			for _, h := range allow {
				if h == "" || strings.ContainsAny(h, "/ ") {
					return &exitError{code: exitUsage, err: fmt.Errorf("invalid argument --allow-http %q: want a host, host:port or *.domain", h)}
				}
			}
			wasm, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			if a.cache != "off" {
				// Only a cache named by --cache or LHENGINE_CACHE: by
				// default nothing is written outside the process.
				t.CacheDir = a.cache
			}
			res, err := engine.TestPlugin(cmd.Context(), wasm, t)
			if err != nil {
				if t.Request != nil {
					return fmt.Errorf("--request %s: %w", request, err)
				}
				return err
			}
			if a.json() {
				if err := a.printJSON(render.PluginTestJSON(args[0], sha(wasm), res)); err != nil {
					return err
				}
			} else {
				render.PluginTest(a.stdout, res)
			}
			if res.FailureKind != "" {
				return &exitError{code: exitFailed, err: fmt.Errorf("the plugin failed (%s): %s", res.FailureKind, res.FailureMessage)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "the step input, as JSON (default null)")
	cmd.Flags().StringVar(&request, "request", "", "a file holding a whole request envelope (specs/abi.md §3), instead of --input")
	cmd.Flags().StringArrayVar(&policies, "policy", nil, "a policy parameter K=V, V as JSON when it parses, else a string (repeatable)")
	cmd.Flags().StringArrayVar(&allow, "allow-http", nil, "a host http.fetch and http effects may reach (repeatable; default: none)")
	return cmd
}
