package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/ledger"
)

// pagesTask is a 30-item fan-out, one unit at a time so that its events
// come in one order: items 4 and 9 fail both their attempts and the rest
// succeed.
const pagesTask = `
task "pages" {
  step "pages" {
    plugin         = "step.wasm"
    for_each       = range(30)
    concurrency    = 1
    allow_failures = 2
    input          = { mode = "fail_until", ok_at = contains([4, 9], each.value) ? 3 : 1, page = each.value }
    retry {
      attempts = 2
      backoff  = "0s"
    }
  }
  step "count" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = length(step.pages.output) }
  }
}
`

var (
	idPattern   = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	timePattern = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
	durPattern  = regexp.MustCompile(`, [0-9.]+(µs|ms|s)\)`)
	seedPattern = regexp.MustCompile(`random seed [0-9a-f]{64}`)
)

// updateGolden: go test -update rewrites the golden files.
var updateGolden = flag.Bool("update", false, "rewrite testdata/cli/*.golden")

// checkGolden compares out, its task ids, times, durations and seeds
// replaced,
// with testdata/cli/name.golden (go test -update rewrites it).
func checkGolden(t *testing.T, name, out string) {
	t.Helper()
	out = idPattern.ReplaceAllString(out, "<ID>")
	out = timePattern.ReplaceAllString(out, "<TIME>")
	out = durPattern.ReplaceAllString(out, ", <DURATION>)")
	out = seedPattern.ReplaceAllString(out, "random seed <SEED>")
	golden := filepath.Join("..", "..", "testdata", "cli", name+".golden")
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), out)
}

// runPages runs pagesTask in b and returns its id.
func runPages(t *testing.T, b *cliBundle) string {
	t.Helper()
	code, out, errOut := b.lh(t, "run", filepath.Join(b.dir, "pages.hcl"))
	require.Equal(t, 0, code, out+errOut)
	id := taskID(out)
	require.Len(t, id, 26)
	return id
}

// TestLsFilters: ls lists newest first, the first --limit, and says how
// many more there are; --status and --name keep the tasks asked for.
func TestLsFilters(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, chainTask)
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "pages.hcl"), []byte(pagesTask), 0o644))
	var queued []string
	for range 3 {
		queued = append(queued, submit(t, b, filepath.Join(b.dir, "task.hcl")))
	}
	done := runPages(t, b)

	out := lhOK(t, b, "ls", "--limit", "2")
	checkGolden(t, "ls-limit", out)
	require.Contains(t, out, done, "newest first")
	require.Contains(t, out, queued[2])
	require.NotContains(t, out, queued[0])

	out = lhOK(t, b, "ls", "--status", "queued", "--order", "oldest")
	checkGolden(t, "ls-queued", out)
	require.Less(t, strings.Index(out, queued[0]), strings.Index(out, queued[2]))
	require.NotContains(t, out, done)

	out = lhOK(t, b, "-o", "json", "ls", "--name", "pages")
	var ts []api.Task
	require.NoError(t, json.Unmarshal([]byte(out), &ts))
	require.Len(t, ts, 1)
	require.Equal(t, done, ts[0].ID)

	out = lhOK(t, b, "-o", "json", "ls", "--status", "succeeded,queued", "--limit", "3")
	require.NoError(t, json.Unmarshal([]byte(out), &ts))
	require.Len(t, ts, 3)

	code, _, errOut := b.lh(t, "ls", "--status", "runing")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `status "runing": want one of queued, running, interrupted`)
}

// TestOutputsLimitAndItem: a fan-out's output shows its first --limit
// items and how many more there are; --item shows one item's committed
// output; --attempts pages and narrows the same way.
func TestOutputsLimitAndItem(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, pagesTask)
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "pages.hcl"), []byte(pagesTask), 0o644))
	id := runPages(t, b)

	out := lhOK(t, b, "outputs", id, "pages", "--limit", "5")
	checkGolden(t, "outputs-limit", out)

	out = lhOK(t, b, "outputs", id)
	require.Equal(t, 20, strings.Count(out, "\nitem "), out)
	require.Contains(t, out, "… 8 more items: --limit 0 for all\n")

	out = lhOK(t, b, "outputs", id, "pages", "--limit", "0")
	require.Equal(t, 28, strings.Count(out, "\nitem "), out)
	require.NotContains(t, out, "more items")

	out = lhOK(t, b, "outputs", id, "pages", "--item", "17")
	checkGolden(t, "outputs-item", out)
	out = lhOK(t, b, "-o", "json", "outputs", id, "pages", "--item", "17")
	require.JSONEq(t, `{"mode":"fail_until","ok_at":1,"page":17}`, out)

	code, _, errOut := b.lh(t, "outputs", id, "pages", "--item", "4")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "item 4 of step \"pages\" has not committed")
	code, _, errOut = b.lh(t, "outputs", id, "--item", "4")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--item needs STEP")

	out = lhOK(t, b, "outputs", id, "pages", "--attempts", "--item", "4")
	checkGolden(t, "outputs-attempts-item", out)
	out = lhOK(t, b, "outputs", id, "--attempts", "--limit", "3")
	require.Equal(t, 3, strings.Count(out, "== "), out)
	require.Contains(t, out, "… 30 more attempts: --limit 0 for all\n", "32 attempts of pages and 1 of count")
	out = lhOK(t, b, "-o", "json", "outputs", id, "--attempts")
	var all []*ledger.Attempt
	require.NoError(t, json.Unmarshal([]byte(out), &all))
	require.Len(t, all, 33)
}

// TestEventsFilters: events --type and --since keep the events asked
// for, --limit the first of them with how many more there are.
func TestEventsFilters(t *testing.T) {
	t.Parallel()
	b := setupCLI(t, pagesTask)
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "pages.hcl"), []byte(pagesTask), 0o644))
	id := runPages(t, b)

	out := lhOK(t, b, "events", id, "--type", "unit_failed,item_failed", "--since", "1h")
	checkGolden(t, "events-type", out)

	out = lhOK(t, b, "events", id, "--type", "unit_failed", "--type", "item_failed", "--limit", "2")
	checkGolden(t, "events-limit", out)

	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	out = lhOK(t, b, "-o", "json", "events", id, "--since", future)
	require.Empty(t, out)

	code, _, errOut := b.lh(t, "events", id, "--since", "yesterday")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `--since "yesterday": want a duration back from now`)
	code, _, errOut = b.lh(t, "events", id, "--type", "Unit-Failed")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `type "Unit-Failed"`)
}
