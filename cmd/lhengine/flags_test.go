package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNumericFlagsValidated: every count and duration flag is checked
// before the command runs; a value out of range is a usage error (exit 2)
// that names the flag, the value and what it takes, and nothing is
// opened. Before this check `worker --lease 2ns` panicked in the lease
// renewal ticker.
func TestNumericFlagsValidated(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--lease", "2ns"}, "--lease 2ns: want at least 1s"},
		{[]string{"worker", "--lease", "999ms"}, "--lease 999ms: want at least 1s"},
		{[]string{"worker", "--lease", "0s"}, "--lease 0s: want at least 1s"},
		{[]string{"worker", "--lease", "-5s"}, "--lease -5s: want at least 1s"},
		{[]string{"worker", "--poll", "0s"}, "--poll 0s: want a positive duration"},
		{[]string{"worker", "--poll", "-1s"}, "--poll -1s: want a positive duration"},
		{[]string{"worker", "--concurrency", "0"}, "--concurrency 0: want at least 1"},
		{[]string{"worker", "--concurrency", "-4"}, "--concurrency -4: want at least 1"},
		{[]string{"run", "task.hcl", "--concurrency", "0"}, "--concurrency 0: want at least 1"},
		{[]string{"resume", "01J", "--concurrency", "-1"}, "--concurrency -1: want at least 1"},
		{[]string{"effect", "confirm", "01J", "send", "k", "--item", "-1"}, "--item -1: must not be negative"},
		{[]string{"gc", "--older-than", "-1h"}, "--older-than -1h0m0s: must not be negative"},
		{[]string{"--memory-limit", "16MiB", "worker"}, "--memory-limit 16MiB: want at least 32MiB, or off"},
		{[]string{"--memory-limit", "lots", "worker"}, "--memory-limit must be a whole number"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"--home", home}, tc.args...), &out, &errb)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, errb.String())
		require.Contains(t, errb.String(), tc.want, tc.args)
		require.NoDirExists(t, home, "%v opened the store", tc.args)
	}

	// The floors themselves are accepted.
	for _, args := range [][]string{
		{"worker", "--lease", "1s", "--concurrency", "1", "--poll", "1ms"},
		{"effect", "confirm", "--item", "0"},
		{"run", "--concurrency", "1"},
	} {
		root := (&app{}).rootCmd()
		cmd, rest, err := root.Find(args)
		require.NoError(t, err, args)
		require.NoError(t, cmd.ParseFlags(rest), args)
		require.NoError(t, checkFlags(cmd), args)
	}
}
