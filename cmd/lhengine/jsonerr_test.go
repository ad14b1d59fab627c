package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/ledger"
)

// TestErrorsNameTheirArgumentsAndSpeakJSON: a missing argument is named
// with the usage line (exit 2); with -o json every error is one JSON
// object on stderr, {"code", "error", "exit"}, with the text form's exit
// status, and an invalid task file's diagnostics inside it.
func TestErrorsNameTheirArgumentsAndSpeakJSON(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	code, _, errOut := b.lh(t, "status")
	require.Equal(t, 2, code)
	require.Equal(t, "error: ID is required: lhengine status ID; list tasks with lhengine ls\n", errOut)
	code, _, errOut = b.lh(t, "reject", "T")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "APPROVAL is required: lhengine reject ID APPROVAL; list them with lhengine approvals")
	code, _, errOut = b.lh(t, "cancel", "a", "b")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "too many arguments: lhengine cancel takes 1 (ID), got 2: a b")

	type jsonErr struct {
		Code        string `json:"code"`
		Error       string `json:"error"`
		Exit        int    `json:"exit"`
		Diagnostics string `json:"diagnostics"`
	}
	parse := func(s string) jsonErr {
		t.Helper()
		var e jsonErr
		require.NoError(t, json.Unmarshal([]byte(s), &e), s)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(s), "\n")+1, "one line: %s", s)
		return e
	}
	code, _, errOut = b.lh(t, "-o", "json", "status")
	require.Equal(t, 2, code)
	require.Equal(t, jsonErr{Code: "usage", Error: "ID is required: lhengine status ID; list tasks with lhengine ls", Exit: 2}, parse(errOut))
	code, _, errOut = b.lh(t, "-o", "json", "status", "NOPE")
	require.Equal(t, 1, code)
	require.Equal(t, "not_found", parse(errOut).Code)

	code, _, errOut = b.lh(t, "-o", "json", "run", filepath.Join(b.dir, "task.hcl"), "--var", "nope=1")
	require.Equal(t, 1, code, errOut)
	e := parse(errOut)
	require.Equal(t, "invalid_task", e.Code)
	require.Contains(t, e.Diagnostics, "nope")
}

// TestResumeRecordsWhoAndWhere: a resume after a crash writes a "resumed"
// event naming who resumed the task and from which host, folder and
// process.
func TestResumeRecordsWhoAndWhere(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	b := setupCLI(t, fanOutTask)
	out, killed := runCrashing(t, bin, b.home, crashpoint.UnitAfterCommit+"@3", nil, "run", filepath.Join(b.dir, "task.hcl"))
	require.True(t, killed, out)
	id := taskID(out)
	out, killed = runCrashing(t, bin, b.home, "", nil, "resume", id)
	require.False(t, killed, out)
	evs := lhOK(t, b, "-o", "json", "events", id)
	var resumed []ledger.Event
	dec := json.NewDecoder(strings.NewReader(evs))
	for dec.More() {
		var e ledger.Event
		require.NoError(t, dec.Decode(&e))
		if e.Type == ledger.EvResumed {
			resumed = append(resumed, e)
		}
	}
	require.Len(t, resumed, 1)
	require.Equal(t, who(), resumed[0].Owner)
	require.Regexp(t, `^resumed by .+ from .+:/.+ \(pid \d+\)$`, resumed[0].Message)
}
