package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
)

// TestStatusAndNotesCommands: a 12-page audit that waits for an approval
// shows its progress line, its findings and what waits for a person in
// status (and the same numbers in -o json's progress); notes filters and
// pages the findings; events print the date.
func TestStatusAndNotesCommands(t *testing.T) {
	t.Parallel()
	b := setupProcs(t)
	id := b.runToApproval(t, `
task "site-audit" {
  progress {
    unit = "pages"
  }
  step "pages" {
    plugin      = "handoff.wasm"
    for_each    = range(12)
    concurrency = 4
    input       = { mode = "page" }
  }
  step "publish" {
    plugin = "step.wasm"
    input  = { mode = "echo", n = 1 }
    approval {
      prompt = "Publish the report?"
    }
  }
}
`)

	out := lhOK(t, b, "status", id)
	first := strings.SplitN(out, "\n", 2)[0]
	require.Regexp(t, `^site-audit · waiting_approval \d+s · 12 / 12 pages \(100%\) · time left unknown$`, first)
	for _, want := range []string{
		"\ndecisions: 1\n  pages under /old are out of scope (pages[7], ",
		"  9 more: lhengine notes " + id + " --kind finding\n",
		"\nwaiting for you:\n  approval 1 · publish[0] · Publish the report? · lhengine approve " + id + " 1\n",
		"  continue: lhengine approvals " + id,
		"\ntask " + id + ` "site-audit": waiting_approval` + "\n",
	} {
		require.Contains(t, out, want)
	}
	require.Regexp(t, `\nfindings: 12\n(  page \d+: no title \(pages\[\d+\], [-0-9: ]+\)\n){3}  9 more`, out, "the newest 3, in commit order")
	require.Less(t, strings.Count(out, "\n"), 40)

	out = lhOK(t, b, "-o", "json", "status", id)
	var rep api.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	p := rep.Progress
	require.Equal(t, "pages", p.Unit)
	require.Equal(t, "pages", p.Step)
	require.Equal(t, 12, p.Done)
	require.Equal(t, 12, *p.Total)
	require.Nil(t, p.EtaS)
	require.Equal(t, 1, p.Waiting.Approvals)
	require.Contains(t, out, `"eta_s": null`)

	out = lhOK(t, b, "notes", id, "--kind", "finding", "--grep", "PAGE 1", "--limit", "2")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	// Pages commit in any order (concurrency 4): pages 1, 10 and 11 match,
	// two on the first page and the third on the next, each once.
	note := regexp.MustCompile(`^ +\d+ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d finding +pages\[(\d+)\] page (\d+): no title$`)
	var pages []string
	for _, l := range lines[:2] {
		m := note.FindStringSubmatch(l)
		require.NotNil(t, m, l)
		require.Equal(t, m[1], m[2], l)
		pages = append(pages, m[1])
	}
	require.Regexp(t, `^more: lhengine notes `+id+` --from \d+ --kind "finding" --grep "PAGE 1" --limit 2$`, lines[2])
	from := regexp.MustCompile(`--from (\d+)`).FindStringSubmatch(lines[2])[1]
	out = lhOK(t, b, "notes", id, "--from", from, "--kind", "finding", "--grep", "PAGE 1", "--limit", "2")
	require.NotContains(t, out, "more:", "pages 1, 10 and 11 match: the second page is the last")
	lines = strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 1, out)
	m := note.FindStringSubmatch(lines[0])
	require.NotNil(t, m, lines[0])
	pages = append(pages, m[1])
	require.ElementsMatch(t, []string{"1", "10", "11"}, pages)

	out = lhOK(t, b, "-o", "json", "notes", id, "--kind", "decision")
	var page api.NotesPage
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Notes, 1)
	require.EqualValues(t, 13, page.Total)
	require.Zero(t, page.Next)

	out = lhOK(t, b, "events", id)
	require.Regexp(t, regexp.MustCompile(`(?m)^ +0 \d{4}-\d\d-\d\d \d\d:\d\d:\d\d submitted `), out)
}
