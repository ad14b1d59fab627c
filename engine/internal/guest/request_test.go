package guest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/fault"
)

func TestRequestJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		req  Request
		want string
	}{
		{
			name: "plain step",
			req:  Request{TaskID: "01J", TaskName: "report", Step: "draft", Attempt: 1, Input: json.RawMessage(`{"topic": "x"}`)},
			want: `{"abi":1,"task_id":"01J","task_name":"report","step":"draft","item":null,"attempt":1,"input":{"topic":"x"},"policy":{}}`,
		},
		{
			name: "fan-out item with repair",
			req: Request{TaskID: "01J", TaskName: "audit", Step: "check", Attempt: 2,
				Item:   &Item{Index: 3, Key: json.RawMessage(`"/about"`), Value: json.RawMessage(`{"url":"/about"}`)},
				Repair: &Repair{Count: 1, Reason: "missing section: Risks"}},
			want: `{"abi":1,"task_id":"01J","task_name":"audit","step":"check","item":{"index":3,"key":"/about","value":{"url":"/about"}},"attempt":2,"repair":{"count":1,"reason":"missing section: Risks"},"input":null,"policy":{}}`,
		},
		{
			name: "repair count zero is omitted, nil key is null",
			req:  Request{Step: "s", Repair: &Repair{}, Item: &Item{}},
			want: `{"abi":1,"task_id":"","task_name":"","step":"s","item":{"index":0,"key":null,"value":null},"attempt":0,"input":null,"policy":{}}`,
		},
		{
			name: "policy parameters",
			req:  Request{Step: "draft", Attempt: 1, Policy: json.RawMessage(`{"few_shot":"examples/v2","single_tool":true}`)},
			want: `{"abi":1,"task_id":"","task_name":"","step":"draft","item":null,"attempt":1,"input":null,"policy":{"few_shot":"examples/v2","single_tool":true}}`,
		},
		{
			name: "objective and constraints, verbatim",
			req:  Request{Step: "check", Attempt: 1, Objective: "Audit every page", Constraints: []string{"never write to the site", "ask  first"}},
			want: `{"abi":1,"task_id":"","task_name":"","step":"check","item":null,"attempt":1,"input":null,"policy":{},"objective":"Audit every page","constraints":["never write to the site","ask  first"]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}

func TestParseResult(t *testing.T) {
	t.Parallel()
	cases := []struct {
		stdout string
		output string
		repair string // reason, when a repair
		kind   fault.Kind
		msg    string
	}{
		{stdout: `{"output":{"a": [1, 2]}}` + "\n", output: `{"a":[1,2]}`},
		{stdout: `  {"output":"x","unknown":{"fields":"ignored"}}  `, output: `"x"`},
		{stdout: `{}`, output: `null`},
		{stdout: `{"output":null}`, output: `null`},
		{stdout: `{"needs_repair":true,"reason":"missing section: Risks"}`, repair: "missing section: Risks"},
		{stdout: `{"needs_repair":false,"output":3}`, output: `3`},
		{stdout: `{"needs_repair":true}`, repair: ""},
		{stdout: `{"error":"boom\nsecond line"}`, kind: fault.PluginError, msg: "boom second line"},
		{stdout: `{"error":""}`, kind: fault.PluginError, msg: "(no message)"},
		{stdout: `{"error":"e","needs_repair":true,"output":1}`, kind: fault.PluginError, msg: "e"},
		{stdout: `{"error":null,"output":1}`, output: `1`},
		{stdout: ``, kind: fault.BadResult, msg: "wrote nothing"},
		{stdout: "\n\t ", kind: fault.BadResult, msg: "wrote nothing"},
		{stdout: `{"output":1}{"output":2}`, kind: fault.BadResult, msg: "more after"},
		{stdout: `{"output":1} x`, kind: fault.BadResult, msg: "more after"},
		{stdout: `{"output":1`, kind: fault.BadResult, msg: "not one JSON object"},
		{stdout: `[1]`, kind: fault.BadResult, msg: "not a JSON object"},
		{stdout: `"str"`, kind: fault.BadResult, msg: "not a JSON object"},
		{stdout: `{"error":7}`, kind: fault.BadResult, msg: `"error" must be a string`},
		{stdout: `{"needs_repair":"yes"}`, kind: fault.BadResult, msg: `"needs_repair" must be a boolean`},
		{stdout: `{"needs_repair":true,"reason":1}`, kind: fault.BadResult, msg: `"reason" must be a string`},
		{stdout: "{\"output\":\"\xff\"}", kind: fault.BadResult, msg: "UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.stdout, func(t *testing.T) {
			t.Parallel()
			got, err := parseResult([]byte(tc.stdout))
			if tc.kind != "" {
				require.NotNil(t, err)
				require.Equal(t, tc.kind, err.Kind)
				require.Contains(t, err.Message, tc.msg)
				return
			}
			require.Nil(t, err)
			require.Equal(t, tc.output, string(got.output))
			require.Equal(t, tc.output == "", got.needsRepair)
			require.Equal(t, tc.repair, got.reason)
		})
	}
}

func TestLogBuffer(t *testing.T) {
	t.Parallel()
	l := newLogBuffer(100) // 75 head, 25 tail
	l.line("info", "start")
	for i := 0; i < 50; i++ {
		l.Write([]byte("0123456789"))
	}
	l.Write([]byte("the end\n"))
	got := string(l.Bytes())
	// 13+500+8 = 521 bytes: the first 75 and the last 25 are kept.
	require.Equal(t, "[info] start\n"+"01234567890123456789012345678901234567890123456789012345678901"+
		"\n[truncated: 421 bytes dropped]\n"+"34567890123456789the end\n", got)
	require.Equal(t, "...", oneLine("..."))
	require.Contains(t, l.stderrTail(), "the end")

	small := newLogBuffer(100)
	small.Write([]byte("a\nb\n\n"))
	require.Equal(t, "a\nb\n\n", string(small.Bytes()))
	require.Equal(t, "a | b", small.stderrTail())
}
