package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/ledger"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	b := &cliBundle{home: filepath.Join(t.TempDir(), "home")}
	code, out, _ := b.lh(t, "version")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "lhengine 0.")
	require.Regexp(t, `(?m)^commit:        ([0-9a-f]{40}|unknown \(built without VCS information\))`, out)
	require.Contains(t, out, "plugin ABI:    v1")
	require.Contains(t, out, "task language: v1")
	require.Contains(t, out, "wazero:        v1.")
	require.Contains(t, out, "badger:        v4.")

	code, flag, _ := b.lh(t, "--version")
	require.Equal(t, exitOK, code)
	require.Equal(t, out, flag, "--version prints what version prints")

	code, js, _ := b.lh(t, "-o", "json", "version")
	require.Equal(t, exitOK, code)
	var v versions
	require.NoError(t, json.Unmarshal([]byte(js), &v))
	require.Equal(t, 1, v.ABI)
	require.Equal(t, 1, v.Language)
	require.NotEqual(t, "unknown", v.Badger)
	_, err := os.Stat(b.home)
	require.ErrorIs(t, err, os.ErrNotExist, "version opens no home")
}

func TestCommandsAboutTasksNeverCreateAHome(t *testing.T) {
	t.Parallel()
	b := &cliBundle{home: filepath.Join(t.TempDir(), "nowhere")}
	for _, args := range [][]string{
		{"ls"}, {"status", "X"}, {"outputs", "X"}, {"events", "X"}, {"artifacts", "X"},
		{"artifact", "get", "sha256:00"}, {"effects", "X"}, {"effect", "confirm", "X", "s", "k"},
		{"cancel", "X"}, {"resume", "X"}, {"rm", "X"},
	} {
		code, _, errOut := b.lh(t, args...)
		require.Equal(t, exitFailed, code, "%v", args)
		require.Contains(t, errOut, "no lhengine home at", "%v", args)
		require.Contains(t, errOut, "--home", "%v: the message says how to point at a home", args)
		_, err := os.Stat(b.home)
		require.ErrorIs(t, err, os.ErrNotExist, "%v created the home", args)
	}
}

// interruptedTask submits the bundle's task and works it until its first
// commit, the way a killed process leaves its task: recorded as running,
// worked on by nobody. It returns the task's ID.
func (b *cliBundle) interruptedTask(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := engine.Open(ctx, engine.Config{Home: b.home})
	require.NoError(t, err)
	task, _, err := e.Submit(ctx, filepath.Join(b.dir, "task.hcl"), engine.SubmitOptions{})
	require.NoError(t, err)
	err = e.Work(ctx, engine.WorkOptions{Task: task.ID, OnCommit: func(*ledger.Task) { cancel() }})
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, e.Close(context.Background()))
	return task.ID
}

func TestATaskWhoseProcessIsGoneShowsInterrupted(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	id := b.interruptedTask(t)

	out := lhOK(t, b, "ls")
	require.Contains(t, out, "interrupted")
	require.NotContains(t, out, "running")
	out = lhOK(t, b, "status", id)
	require.Contains(t, out, ": interrupted")
	require.Contains(t, out, "lhengine resume "+id)

	// --follow on a task nobody works prints what there is, says so, and
	// waits for a worker without holding the home: a resume started while
	// it waits runs, and the follower sees it through to the end.
	var fout bytes.Buffer
	ferr := newWatchWriter("waiting for one")
	followed := make(chan int, 1)
	go func() {
		followed <- run(context.Background(), []string{"--home", b.home, "events", "--follow", id}, &fout, ferr)
	}()
	<-ferr.seen
	require.Contains(t, ferr.String(), "no process is working on it")
	lhOK(t, b, "resume", id)
	require.Equal(t, exitOK, <-followed, ferr.String())
	require.Contains(t, fout.String(), "unit_done")
	require.Contains(t, fout.String(), "succeeded")

	code, out, _ := b.lh(t, "events", "--follow", id)
	require.Equal(t, exitOK, code, "a succeeded task ends the follow with 0")
	require.Contains(t, out, "succeeded")
}
