package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	b := &cliBundle{home: filepath.Join(t.TempDir(), "home")}
	code, out, _ := b.lh(t, "version")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "lhengine 0.")
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
