//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/internal/crashpoint"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/plugins/examples/site-audit/site/sitegen"
)

// auditKinds are the finding counters of the site-audit example, with the
// planted count each must equal.
func auditKinds(p sitegen.Planted) map[string]int64 {
	return map[string]int64{
		"pages":               int64(p.Pages),
		"missing_title":       int64(p.MissingTitle),
		"missing_description": int64(p.MissingDescription),
		"duplicate_title":     int64(p.DuplicateTitle),
		"broken_links":        int64(p.BrokenLinks),
		"images_without_alt":  int64(p.ImagesWithoutAlt),
	}
}

// TestSiteAuditExample does what make audit-demo does, with the real
// binary, the example's plugins and its generated site of 300 pages on
// loopback, and kills the run with SIGKILL at a random commit of the
// check fan-out (LHENGINE_AUDIT_SEED=N repeats a run). The resume checks
// the rest and returns with exit code 3 on the approval of the title
// rewrites, whose prompt says how many pages lack a title; another command
// approves; the next resume writes the report. Its numbers equal the
// planted ones, and so do the task's counters (status -o json) and what
// the committed records say (the check step's output and the finding
// notes): a page retried after its 500, or run again after the kill, is
// counted once. The site received no request but GET and HEAD, and each
// page that fails once answered 500 once.
func TestSiteAuditExample(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LHENGINE_AUDIT_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "LHENGINE_AUDIT_SEED")
	}
	// Commit 1 is the sitemap's; 2 to 301 are the pages'.
	killAt := 2 + rand.New(rand.NewPCG(seed, 0)).IntN(290)
	t.Logf("seed %d: killed at commit %d (LHENGINE_AUDIT_SEED=%d repeats it)", seed, killAt, seed)

	const pages = 300
	site := sitegen.Generate(pages, 1)
	planted := site.Planted()
	require.Positive(t, planted.MissingTitle)
	require.Positive(t, planted.DuplicateTitle)
	require.Positive(t, planted.BrokenLinks)
	require.Positive(t, planted.FailOnce)
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)

	b := &procBundle{bin: buildBinary(t), dir: t.TempDir()}
	b.home = filepath.Join(b.dir, "home")
	example := filepath.Join(testwasm.ModuleRoot(t), "plugins/examples/site-audit")
	for _, p := range []string{"sitemap", "check", "suggest", "report"} {
		testwasm.Copy(t, testwasm.BuildGo(t, filepath.Join(example, p)), filepath.Join(b.dir, p+".wasm"))
	}
	src, err := os.ReadFile(filepath.Join(example, "task.hcl"))
	require.NoError(t, err)
	task := filepath.Join(b.dir, "task.hcl")
	require.NoError(t, os.WriteFile(task, src, 0o644))

	out, killed := runCrashing(t, b.bin, b.home, fmt.Sprintf("%s@%d", crashpoint.UnitAfterCommit, killAt), nil,
		"run", task, "--var", "site="+srv.URL)
	require.True(t, killed, "the run must die at commit %d:\n%s", killAt, out)
	id := taskID(out)
	require.Len(t, id, 26, out)
	killedRep := b.status(t, id)
	done, _ := killedRep.Task.Progress()
	// A failed attempt's commit is one of the commits counted too.
	require.GreaterOrEqual(t, done, killAt-planted.FailOnce, "commit %d was synced before the kill", killAt)
	require.Less(t, done, pages+1, "the fan-out was not finished when killed")

	code, out, errOut := b.lh(t, "resume", id)
	require.Equal(t, 3, code, "the resume checks the rest and returns on the approval:\n%s\n%s", out, errOut)
	as := b.approvalsJSON(t, id)
	require.Len(t, as, 1)
	require.Equal(t, "suggest", as[0].Step)
	require.Equal(t, ledger.ApprovalPending, as[0].State)
	require.Equal(t, fmt.Sprintf("Generate title rewrites for %d pages?", planted.MissingTitle), as[0].Prompt)
	code, out, errOut = b.lh(t, "approve", id, as[0].ID, "--note", "go ahead")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	code, out, errOut = b.lh(t, "resume", id)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)

	want := auditKinds(planted)
	rep := b.status(t, id)
	require.Equal(t, api.Succeeded, rep.Task.Status, rep.Task.Reason)
	require.Equal(t, want, rep.Task.Counters, "the counters equal the planted counts")

	out = lhOK(t, b, "outputs", "-o", "json", id, "report")
	var ref struct {
		JSON   string           `json:"json"`
		Totals map[string]int64 `json:"totals"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &ref), out)
	out = lhOK(t, b, "artifact", "get", ref.JSON)
	var report struct {
		Totals      map[string]int64 `json:"totals"`
		Suggestions []struct {
			URL   string `json:"url"`
			Title string `json:"title"`
		} `json:"title_suggestions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &report), out)
	require.Equal(t, ref.Totals, report.Totals)
	for k, n := range want {
		require.Equal(t, n, report.Totals[k], "report: %s", k)
	}
	require.Len(t, report.Suggestions, planted.MissingTitle)
	for _, s := range report.Suggestions {
		require.True(t, strings.HasSuffix(s.Title, " | Example Site"), s.Title)
	}

	stats := site.Stats()
	require.Zero(t, stats.Writes, "the task never writes to the site")
	require.Equal(t, int64(planted.FailOnce), stats.Failed500)

	// The committed records say the same: the check step's outputs (one
	// per page) and the finding notes (one per problem; one per shared
	// title, naming how many pages share it).
	withStore(t, b.home, func(r ledger.Reader) {
		raw, err := r.StepOutput(id, 1)
		require.NoError(t, err)
		var checked []struct {
			URL                string   `json:"url"`
			MissingTitle       bool     `json:"missing_title"`
			MissingDescription bool     `json:"missing_description"`
			BrokenLinks        []string `json:"broken_links"`
			ImagesWithoutAlt   int64    `json:"images_without_alt"`
		}
		require.NoError(t, json.Unmarshal(raw, &checked))
		fromOutputs := map[string]int64{"pages": int64(len(checked)), "duplicate_title": want["duplicate_title"]}
		urls := map[string]bool{}
		for _, c := range checked {
			urls[c.URL] = true
			if c.MissingTitle {
				fromOutputs["missing_title"]++
			}
			if c.MissingDescription {
				fromOutputs["missing_description"]++
			}
			fromOutputs["broken_links"] += int64(len(c.BrokenLinks))
			fromOutputs["images_without_alt"] += c.ImagesWithoutAlt
		}
		require.Len(t, urls, pages, "every page once")
		require.Equal(t, want, fromOutputs, "the committed outputs")

		notes, err := r.Notes(id)
		require.NoError(t, err)
		fromNotes := map[string]int64{"pages": int64(pages)}
		for _, n := range notes {
			if n.Kind != sdkFinding {
				continue
			}
			kind, text, ok := strings.Cut(n.Text, ": ")
			require.True(t, ok, n.Text)
			if kind == "duplicate_title" {
				shared, err := strconv.ParseInt(strings.SplitN(text, " ", 2)[0], 10, 64)
				require.NoError(t, err, n.Text)
				fromNotes[kind] += shared
				continue
			}
			fromNotes[kind]++
		}
		require.Equal(t, want, fromNotes, "the committed finding notes")
	})
}

// sdkFinding is the kind of a finding note (the SDK's NoteFinding).
const sdkFinding = "finding"
