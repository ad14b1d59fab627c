package taskfile_test

import (
	"fmt"
	"os"

	"github.com/lhengine/lhengine/engine/internal/jsonval"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

func Example() {
	src := []byte(`
task "greet" {
  variable "names" {
    type = list(string)
  }
  step "hello" {
    plugin   = "plugins/hello.wasm"
    for_each = var.names
    input    = { n = each.key, greeting = format("Hello, %s!", title(each.value)) }
  }
}
`)
	task, diags := taskfile.Parse("tasks/greet.hcl", src, taskfile.Options{})
	if diags.HasErrors() {
		_ = taskfile.WriteDiagnostics(os.Stderr, map[string][]byte{"tasks/greet.hcl": src}, diags, 80, false)
		return
	}
	vars, diags := task.Vars(map[string]string{"names": `["ada", "alan"]`})
	if diags.HasErrors() {
		return
	}
	step := task.Steps[0]
	fmt.Println(step.PluginPath, step.Concurrency, step.Timeout)

	items, _ := step.EvalForEach(taskfile.Scope{TaskID: "t1", Vars: vars})
	for i := range items {
		in, _ := step.EvalInput(taskfile.Scope{TaskID: "t1", Vars: vars, Each: &items[i]})
		b, _ := jsonval.ToJSON(in)
		fmt.Println(string(b))
	}
	// Output:
	// tasks/plugins/hello.wasm 16 1m0s
	// {"greeting":"Hello, Ada!","n":0}
	// {"greeting":"Hello, Alan!","n":1}
}
