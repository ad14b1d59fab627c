package taskfile

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/lhengine/lhengine/engine/internal/jsonval"
)

const evalTask = `
task "audit" {
  variable "site" {
    type = string
  }
  variable "n" {
    type    = number
    default = 2
  }
  step "fetch" {
    plugin = "p.wasm"
    input  = { site = upper(var.site), id = task.id, name = task.name, n = var.n * 2 }
  }
  step "none" {
    plugin = "p.wasm"
  }
  step "list" {
    plugin   = "p.wasm"
    for_each = step.fetch.output.pages
    input    = { key = each.key, page = each.value, site = var.site }
  }
  step "map" {
    plugin   = "p.wasm"
    for_each = step.fetch.output.byname
    input    = "${each.key}=${each.value}"
  }
  step "collect" {
    plugin = "p.wasm"
    input  = { count = length(step.list.output), first = step.list.output[0], joined = join(",", step.fetch.output.pages) }
  }
}
`

func TestEvalInput(t *testing.T) {
	t.Parallel()
	task := parseTest(t, evalTask)
	vars := map[string]cty.Value{"site": cty.StringVal("example.org"), "n": cty.NumberIntVal(2)}
	fetchOut := cty.ObjectVal(map[string]cty.Value{
		"pages":  cty.TupleVal([]cty.Value{cty.StringVal("b"), cty.StringVal("a")}),
		"byname": cty.ObjectVal(map[string]cty.Value{"zeta": cty.NumberIntVal(1), "alpha": cty.NumberIntVal(2)}),
	})

	t.Run("variables, functions and task attributes", func(t *testing.T) {
		t.Parallel()
		v, diags := task.Step("fetch").EvalInput(Scope{TaskID: "t-1", Vars: vars})
		require.False(t, diags.HasErrors(), diags.Error())
		require.True(t, cty.ObjectVal(map[string]cty.Value{
			"site": cty.StringVal("EXAMPLE.ORG"),
			"id":   cty.StringVal("t-1"),
			"name": cty.StringVal("audit"),
			"n":    cty.NumberIntVal(4),
		}).RawEquals(v), "%#v", v)
	})

	t.Run("no input is null", func(t *testing.T) {
		t.Parallel()
		v, diags := task.Step("none").EvalInput(Scope{})
		require.Empty(t, diags)
		require.True(t, v.RawEquals(cty.NullVal(cty.DynamicPseudoType)))
	})

	t.Run("each in input", func(t *testing.T) {
		t.Parallel()
		v, diags := task.Step("list").EvalInput(Scope{
			Vars:    vars,
			Outputs: map[string]cty.Value{"fetch": fetchOut},
			Each:    &Each{Key: cty.NumberIntVal(1), Value: cty.StringVal("a")},
		})
		require.False(t, diags.HasErrors(), diags.Error())
		require.Equal(t, `{"key":1,"page":"a","site":"example.org"}`, string(mustJSON(t, v)))
	})

	t.Run("earlier outputs, fan-out output as a list", func(t *testing.T) {
		t.Parallel()
		listOut := cty.TupleVal([]cty.Value{cty.StringVal("r0"), cty.StringVal("r1")})
		v, diags := task.Step("collect").EvalInput(Scope{
			Vars:    vars,
			Outputs: map[string]cty.Value{"fetch": fetchOut, "list": listOut, "map": cty.NilVal},
		})
		require.False(t, diags.HasErrors(), diags.Error())
		require.Equal(t, `{"count":2,"first":"r0","joined":"b,a"}`, string(mustJSON(t, v)))
	})

	t.Run("missing output", func(t *testing.T) {
		t.Parallel()
		_, diags := task.Step("collect").EvalInput(Scope{Vars: vars, Outputs: map[string]cty.Value{"fetch": fetchOut}})
		require.True(t, diags.HasErrors())
		require.Equal(t, "Step output not available", diags[0].Summary)
		require.Equal(t, 29, diags[0].Subject.Start.Line)
	})

	t.Run("missing variable and each", func(t *testing.T) {
		t.Parallel()
		_, diags := task.Step("list").EvalInput(Scope{Outputs: map[string]cty.Value{"fetch": fetchOut}})
		require.True(t, diags.HasErrors())
		var summaries []string
		for _, d := range diags {
			summaries = append(summaries, d.Summary)
			require.NotNil(t, d.Subject)
		}
		require.ElementsMatch(t, []string{`No value for "each"`, `No value for "each"`, "No value for variable"}, summaries)
	})

	t.Run("wrong types at run time", func(t *testing.T) {
		t.Parallel()
		// pages is a string, so join fails; outputs have no declared type, so
		// only running finds this.
		badOut := cty.ObjectVal(map[string]cty.Value{"pages": cty.StringVal("oops")})
		_, diags := task.Step("collect").EvalInput(Scope{
			Vars:    vars,
			Outputs: map[string]cty.Value{"fetch": badOut, "list": cty.EmptyTupleVal},
		})
		require.True(t, diags.HasErrors())
		for _, d := range diags {
			require.NotNil(t, d.Subject)
			require.Equal(t, 29, d.Subject.Start.Line)
		}
	})
}

func TestEvalForEach(t *testing.T) {
	t.Parallel()
	task := parseTest(t, evalTask)
	scope := func(out cty.Value) Scope {
		return Scope{
			Vars:    map[string]cty.Value{"site": cty.StringVal("s"), "n": cty.NumberIntVal(2)},
			Outputs: map[string]cty.Value{"fetch": out},
		}
	}
	str := cty.StringVal
	num := func(n int64) cty.Value { return cty.NumberIntVal(n) }

	tests := []struct {
		name string
		step string
		out  cty.Value
		want []Each
		err  string
	}{
		{
			name: "tuple in element order",
			step: "list",
			out:  cty.ObjectVal(map[string]cty.Value{"pages": cty.TupleVal([]cty.Value{str("b"), str("a"), num(3)})}),
			want: []Each{{num(0), str("b")}, {num(1), str("a")}, {num(2), num(3)}},
		},
		{
			name: "list",
			step: "list",
			out:  cty.ObjectVal(map[string]cty.Value{"pages": cty.ListVal([]cty.Value{str("x"), str("y")})}),
			want: []Each{{num(0), str("x")}, {num(1), str("y")}},
		},
		{
			name: "set in cty order, keyed by index",
			step: "list",
			out:  cty.ObjectVal(map[string]cty.Value{"pages": cty.SetVal([]cty.Value{str("y"), str("x")})}),
			want: []Each{{num(0), str("x")}, {num(1), str("y")}},
		},
		{
			name: "empty list has no items",
			step: "list",
			out:  cty.ObjectVal(map[string]cty.Value{"pages": cty.EmptyTupleVal}),
			want: []Each{},
		},
		{
			name: "object in key order",
			step: "map",
			out:  cty.ObjectVal(map[string]cty.Value{"byname": cty.ObjectVal(map[string]cty.Value{"zeta": num(1), "alpha": num(2), "Beta": num(3)})}),
			want: []Each{{str("Beta"), num(3)}, {str("alpha"), num(2)}, {str("zeta"), num(1)}},
		},
		{
			name: "map in key order",
			step: "map",
			out:  cty.ObjectVal(map[string]cty.Value{"byname": cty.MapVal(map[string]cty.Value{"b": num(1), "a": num(2)})}),
			want: []Each{{str("a"), num(2)}, {str("b"), num(1)}},
		},
		{
			name: "string is not a collection",
			step: "list",
			out:  cty.ObjectVal(map[string]cty.Value{"pages": str("nope")}),
			err:  "Invalid for_each argument",
		},
		{
			name: "null",
			step: "list",
			out:  cty.ObjectVal(map[string]cty.Value{"pages": cty.NullVal(cty.List(cty.String))}),
			err:  "Invalid for_each argument",
		},
		{
			name: "attribute missing from the output",
			step: "list",
			out:  cty.EmptyObjectVal,
			err:  "Unsupported attribute",
		},
		{
			name: "null output",
			step: "list",
			out:  cty.NilVal,
			err:  "Attempt to get attribute from null value",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			items, diags := task.Step(tt.step).EvalForEach(scope(tt.out))
			if tt.err != "" {
				require.True(t, diags.HasErrors())
				require.Equal(t, tt.err, diags[0].Summary)
				require.NotNil(t, diags[0].Subject)
				require.Nil(t, items)
				return
			}
			require.False(t, diags.HasErrors(), diags.Error())
			require.Len(t, items, len(tt.want))
			for i := range tt.want {
				require.True(t, tt.want[i].Key.RawEquals(items[i].Key), "key %d: %#v", i, items[i].Key)
				require.True(t, tt.want[i].Value.RawEquals(items[i].Value), "value %d: %#v", i, items[i].Value)
			}
		})
	}

	t.Run("not a fan-out step", func(t *testing.T) {
		t.Parallel()
		items, diags := task.Step("fetch").EvalForEach(Scope{})
		require.Nil(t, items)
		require.Empty(t, diags)
	})
}

func mustJSON(t *testing.T, v cty.Value) []byte {
	t.Helper()
	b, err := jsonval.ToJSON(v)
	require.NoError(t, err)
	return b
}

// TestTaskObjectiveAndConstraintsInExpressions: task.objective and
// task.constraints read the task's own, verbatim.
func TestTaskObjectiveAndConstraintsInExpressions(t *testing.T) {
	t.Parallel()
	task := parseTest(t, `
task "audit" {
  objective   = "Audit every page of the site"
  constraints = ["never write to the site", "ask before  emailing"]
  step "a" {
    plugin = "a.wasm"
    input  = { o = task.objective, c = task.constraints, n = length(task.constraints) }
  }
}
`)
	v, diags := task.Step("a").EvalInput(Scope{TaskID: "t-1"})
	require.False(t, diags.HasErrors(), diags.Error())
	b, err := jsonval.ToJSON(v)
	require.NoError(t, err)
	require.JSONEq(t, `{"o":"Audit every page of the site","c":["never write to the site","ask before  emailing"],"n":2}`, string(b))
}

// BenchmarkEvalInputOfAnItem is the input of one fan-out item, as a worker
// evaluates it for every unit, in a task whose earlier steps left outputs
// the input does not read.
func BenchmarkEvalInputOfAnItem(b *testing.B) {
	task := parseTest(b, evalTask)
	outputs := map[string]cty.Value{}
	for i := range 8 {
		outputs[fmt.Sprint("s", i)] = cty.ObjectVal(map[string]cty.Value{"pages": cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})})
	}
	scope := Scope{TaskID: "t-1", Vars: map[string]cty.Value{"site": cty.StringVal("example.org"), "n": cty.NumberIntVal(2)}, Outputs: outputs,
		Each: &Each{Key: cty.NumberIntVal(3), Value: cty.StringVal("/about")}}
	step := task.Step("list")
	b.ReportAllocs()
	for b.Loop() {
		if _, diags := step.EvalInput(scope); diags.HasErrors() {
			b.Fatal(diags.Error())
		}
	}
}
