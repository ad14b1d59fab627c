package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/server"
)

// viewGuestC is the guest of the task page and list tests. Its input's
// "mode" says what it does, and each mode writes a line to its log
// (stderr) first:
//
//	ok           {"output": {"item": ITEM}}; with "note", item 0 notes a
//	             finding and counts a page
//	fail_until   fails ("attempt N fails on purpose") while the attempt is
//	             below input.ok_at, then echoes
//	repair_once  asks for a repair while the envelope has no "repair"
//	             member (its first pass), then {"output": {"repaired": true}}
//	fail         writes input.log to its log and fails with input.message
const viewGuestC = `
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lhengine.h"

static char buf[1024];

static void put(const char *s, const char *e) { fwrite(s, 1, (size_t)(e - s), stdout); }

int main(void) {
	size_t n;
	char *env = read_all(&n);
	if (!env) {
		return 1;
	}
	const char *end = env + n, *in, *ie, *v, *ve;
	if (!member(env, end, "input", &in, &ie)) {
		puts("{\"error\":\"no input\"}");
		return 0;
	}
	int attempt = member(env, end, "attempt", &v, &ve) ? atoi(v) : 0;
	int item = 0;
	const char *it, *ite;
	if (member(env, end, "item", &it, &ite) && member(it, ite, "index", &v, &ve)) {
		item = atoi(v);
	}
	if (member_is(in, ie, "mode", "ok")) {
		fprintf(stderr, "working on item %d\n", item);
		if (item == 0 && member(in, ie, "note", &v, &ve)) {
			lhengine_call_str("progress.note", "{\"kind\":\"finding\",\"text\":\"the front page has no description\"}", buf, sizeof buf);
			lhengine_call_str("progress.count", "{\"name\":\"pages\",\"delta\":1}", buf, sizeof buf);
		}
		printf("{\"output\":{\"item\":%d}}\n", item);
		return 0;
	}
	if (member_is(in, ie, "mode", "fail_until")) {
		fprintf(stderr, "attempt %d\n", attempt);
		int ok_at = member(in, ie, "ok_at", &v, &ve) ? atoi(v) : 1;
		if (attempt < ok_at) {
			printf("{\"error\":\"attempt %d fails on purpose\"}\n", attempt);
			return 0;
		}
		fputs("{\"output\":", stdout);
		put(in, ie);
		puts("}");
		return 0;
	}
	if (member_is(in, ie, "mode", "repair_once")) {
		fprintf(stderr, "checking the draft\n");
		if (!member(env, end, "repair", &v, &ve)) {
			puts("{\"needs_repair\":true,\"reason\":\"the draft has no Risks section\"}");
			return 0;
		}
		puts("{\"output\":{\"repaired\":true}}");
		return 0;
	}
	if (member_is(in, ie, "mode", "fail")) {
		if (member(in, ie, "log", &v, &ve) && *v == '"') {
			for (const char *p = v + 1; p < ve - 1; p++) {
				if (p[0] == '\\' && p[1] == 'n') {
					fputc('\n', stderr);
					p++;
				} else {
					fputc(*p, stderr);
				}
			}
		}
		fputs("{\"error\":", stdout);
		if (member(in, ie, "message", &v, &ve)) {
			put(v, ve);
		} else {
			fputs("\"failed\"", stdout);
		}
		puts("}");
		return 0;
	}
	puts("{\"error\":\"unknown mode\"}");
	return 0;
}
`

// buildViewGuest compiles viewGuestC with testdata/guests/c/json.h beside
// it and returns the module's path.
func buildViewGuest(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "view.c")
	require.NoError(t, os.WriteFile(src, []byte(viewGuestC), 0o644))
	copyFile(t, filepath.Join(testwasm.ModuleRoot(t), "testdata", "guests", "c", "json.h"), filepath.Join(dir, "json.h"))
	return testwasm.BuildC(t, src)
}

// showcaseTask is a task of five steps that leaves something in every
// part of the task page: "fetch" fans out over pages items (a note and a
// count from item 0); "verify" sends the task back to "draft" once;
// "flaky" fails its first attempt and succeeds on its retry; "publish"
// writes a log and fails, failing the task.
func showcaseTask(wasm string, pages int) string {
	return fmt.Sprintf(`
task "showcase" {
  objective = "Check every page, then publish the report"

  variable "site" {
    type    = string
    default = "https://example.test"
  }
  variable "pages" {
    type    = number
    default = %d
  }

  step "fetch" {
    plugin      = %[2]q
    for_each    = range(var.pages)
    concurrency = 4
    input       = { mode = "ok", note = true, site = var.site }
  }

  step "draft" {
    plugin = %[2]q
    input  = { mode = "ok" }
  }

  step "verify" {
    plugin = %[2]q
    input  = { mode = "repair_once" }
    repair {
      restart_from = "draft"
      max          = 2
    }
  }

  step "flaky" {
    plugin = %[2]q
    input  = { mode = "fail_until", ok_at = 2 }
    retry {
      attempts = 3
      backoff  = "0s"
    }
  }

  step "publish" {
    plugin = %[2]q
    input  = { mode = "fail", log = "publishing to ${var.site}\nerror: the server answered 503", message = "the report server answered 503" }
  }
}
`, pages, wasm)
}

// plainTask is a task of one step of viewGuestC's mode (with input's
// other members, HCL, after it).
func plainTask(name, wasm, mode, more string) string {
	return fmt.Sprintf(`
task %q {
  step "only" {
    plugin = %q
    input  = { mode = %q%s }
  }
}
`, name, wasm, mode, more)
}

// dash is a dashboard served over TCP behind a token, on an engine of its
// own that works nothing unless a test runs a task (run), and a headless
// Chromium logged in to it.
type dash struct {
	t     *testing.T
	ctx   context.Context
	e     *engine.Engine
	base  string
	token string
	b     browser // controls_test.go
	dir   string
}

// dashOptions change what startDash serves.
type dashOptions struct {
	// wrap wraps the handler (RequireToken over the server's); nil: none.
	wrap func(srv *server.Server, h http.Handler) http.Handler
	// logger is the server's logger; nil: testLogger.
	logger hclog.Logger
}

// startDash serves a new engine's dashboard behind a token and starts a
// Chromium.
func startDash(t *testing.T, timeout time.Duration, o dashOptions) *dash {
	t.Helper()
	chrome := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	d := &dash{t: t, ctx: ctx, token: "view-token-0123456789", dir: t.TempDir()}
	home := filepath.Join(d.dir, "home")
	e, err := engine.Open(ctx, engine.Config{Home: home})
	require.NoError(t, err)
	d.e = e
	if o.logger == nil {
		o.logger = testLogger(t)
	}
	srv := server.New(e, server.Options{Dashboard: true, Logger: o.logger, Owner: api.Owner{Home: home, Works: "all", Command: "lhengine serve"}})
	h := server.RequireToken(srv.Handler(), d.token)
	if o.wrap != nil {
		h = o.wrap(srv, h)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, l, h, time.Second) }()
	d.base = "http://" + l.Addr().String()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	d.b = browser{t: t, ctx: bctx}
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		stopServe()
		require.NoError(t, <-served)
		require.NoError(t, e.Close(context.Background()))
	})
	return d
}

// login logs the browser in with the token on the login page.
func (d *dash) login() {
	d.t.Helper()
	require.Equal(d.t, "/login", d.b.navigate("open the dashboard", chromedp.Navigate(d.base+"/")))
	require.Equal(d.t, "/", d.b.navigate("log in", chromedp.SendKeys(chromedp.ID("token"), d.token), chromedp.Click(chromedp.ID("login"))))
}

// submit submits the task source src and returns its id.
func (d *dash) submit(src string) string {
	d.t.Helper()
	file := filepath.Join(d.t.TempDir(), "task.hcl")
	require.NoError(d.t, os.WriteFile(file, []byte(src), 0o644))
	task, _, err := d.e.Submit(d.ctx, file, engine.SubmitOptions{})
	require.NoError(d.t, err)
	return task.ID
}

// run works task id until nothing of it is left to do.
func (d *dash) run(id string) *ledger.Task {
	d.t.Helper()
	require.NoError(d.t, d.e.Work(d.ctx, engine.WorkOptions{Task: id, ExitWhenIdle: true, Concurrency: 4, PollEvery: 10 * time.Millisecond}))
	task, err := d.e.Task(d.ctx, id)
	require.NoError(d.t, err)
	return task
}

// open loads path and returns the path and query the browser ended at.
func (d *dash) open(path string) string {
	d.t.Helper()
	resp, err := chromedp.RunResponse(d.b.ctx, chromedp.Navigate(d.base+path))
	if err != nil {
		d.b.show()
	}
	require.NoError(d.t, err, path)
	require.Equal(d.t, 200, int(resp.Status), "%s: %s", path, resp.URL)
	u, err := url.Parse(resp.URL)
	require.NoError(d.t, err)
	return u.RequestURI()
}

// follow clicks the link or button sel and returns the path and query the
// browser ended at.
func (d *dash) follow(what, sel string) string {
	d.t.Helper()
	resp, err := chromedp.RunResponse(d.b.ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		d.b.show()
	}
	require.NoError(d.t, err, what)
	require.Equal(d.t, 200, int(resp.Status), "%s: %s", what, resp.URL)
	u, err := url.Parse(resp.URL)
	require.NoError(d.t, err)
	return u.RequestURI()
}

// list is a JavaScript expression, the JSON of the values of js (a
// function of an element) for each element matching sel.
func list(sel, js string) string {
	return `JSON.stringify([...document.querySelectorAll(` + jsString(sel) + `)].map(e => (` + js + `)(e)))`
}

// TestDashboardTaskList drives the task list in a headless Chromium: the
// newest first with start time, duration and failure reason; filters by
// status, name and id prefix from the form, with the scripts off too (a
// plain GET form whose query is the link to keep); the order; pages of 50;
// a filtered list following the store live, showing only what matches;
// an empty state.
func TestDashboardTaskList(t *testing.T) {
	d := startDash(t, 120*time.Second, dashOptions{})
	wasm := buildViewGuest(t)

	// Three audits that succeed, one that fails, one cancelled, and 52
	// imports queued behind them (no worker runs them): 57 tasks.
	var docs []string
	for range 3 {
		id := d.submit(plainTask("audit docs", wasm, "ok", ""))
		require.Equal(t, ledger.Succeeded, d.run(id).Status)
		docs = append(docs, id)
	}
	shop := d.submit(plainTask("audit shop", wasm, "fail", `, message = "the shop answered 503"`))
	require.Equal(t, ledger.Failed, d.run(shop).Status)
	weekly := d.submit(plainTask("report weekly", wasm, "ok", ""))
	_, err := d.e.Cancel(d.ctx, weekly, "not needed this week")
	require.NoError(t, err)
	var imports []string
	for i := range 52 {
		imports = append(imports, d.submit(plainTask("bulk import", wasm, "ok", fmt.Sprintf(`, batch = %d`, i))))
	}
	d.login()

	// Newest first, 50 to a page.
	ids := list(`#tasks tr`, `r => r.dataset.id`)
	require.Equal(t, "Tasks 1–50 of 57", d.b.eval(`document.getElementById('count').textContent`))
	var want []string
	for i := len(imports) - 1; i >= 2; i-- {
		want = append(want, imports[i])
	}
	require.JSONEq(t, toJSON(t, want), d.b.eval(ids))
	require.Equal(t, "page 1 of 2", d.b.eval(`document.querySelector('#pager span').textContent`))
	require.Equal(t, "/?page=2", d.follow("the next page", "#next"))
	require.Equal(t, "Tasks 51–57 of 57", d.b.eval(`document.getElementById('count').textContent`))
	require.JSONEq(t, toJSON(t, []string{imports[1], imports[0], weekly, shop, docs[2], docs[1], docs[0]}), d.b.eval(ids))
	require.Equal(t, "/", d.follow("the previous page", "#prev"))

	// The columns: start, duration and why for a task that ran and failed;
	// dashes for one that never started.
	cell := func(id, class string) string {
		return d.b.eval(fmt.Sprintf(`document.querySelector('#tasks tr[data-id="%s"] .%s').textContent.trim()`, id, class))
	}
	d.open("/?page=2")
	stored, err := d.e.Task(d.ctx, shop)
	require.NoError(t, err)
	require.Equal(t, stored.StartedAt.UTC().Format("2006-01-02 15:04:05Z"), cell(shop, "started"))
	require.Regexp(t, `^\d+(ms|s)$`, cell(shop, "duration"))
	require.Contains(t, cell(shop, "why"), "the shop answered 503")
	require.Equal(t, "not needed this week", cell(weekly, "why"))
	require.Equal(t, "—", cell(imports[0], "started"))
	require.Equal(t, "—", cell(imports[0], "duration"))
	require.Empty(t, cell(docs[0], "why"))

	// The filters, from the form: status, name (any part, any case), id
	// prefix; the order. Each result is a link.
	d.open("/")
	d.b.eval(`document.getElementById('f-status').value = 'failed', ""`)
	require.Equal(t, "/?status=failed&name=&id=&order=newest", d.follow("filter by status", "#f-apply"))
	require.JSONEq(t, toJSON(t, []string{shop}), d.b.eval(ids))
	require.Equal(t, "Tasks 1–1 of 1 matching (57 in all)", d.b.eval(`document.getElementById('count').textContent`))
	require.Equal(t, "failed", d.b.eval(`document.getElementById('f-status').value`), "the form shows the filter")

	d.b.eval(`document.getElementById('f-status').value = '', document.getElementById('f-name').value = 'AUDIT', ""`)
	require.Equal(t, "/?status=&name=AUDIT&id=&order=newest", d.follow("filter by name", "#f-apply"))
	require.JSONEq(t, toJSON(t, []string{shop, docs[2], docs[1], docs[0]}), d.b.eval(ids))
	d.b.eval(`document.getElementById('f-order').value = 'oldest', ""`)
	d.follow("oldest first", "#f-apply")
	require.JSONEq(t, toJSON(t, []string{docs[0], docs[1], docs[2], shop}), d.b.eval(ids))

	d.b.eval(`document.getElementById('f-name').value = '', document.getElementById('f-id').value = ` + jsString(strings.ToLower(shop[:14])) + `, ""`)
	d.follow("search by id", "#f-apply")
	require.JSONEq(t, toJSON(t, []string{shop}), d.b.eval(ids))

	// A link kept is the same list; a status the list does not know is
	// refused with a page that says why.
	d.open("/?status=succeeded,cancelled&name=o")
	require.JSONEq(t, toJSON(t, []string{weekly, docs[2], docs[1], docs[0]}), d.b.eval(ids))
	require.Equal(t, "succeeded,cancelled", d.b.eval(`document.getElementById('f-status').value`))
	resp, err := chromedp.RunResponse(d.b.ctx, chromedp.Navigate(d.base+"/?status=sleeping"))
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, int(resp.Status))
	require.Contains(t, d.b.eval(`document.querySelector('.error').textContent`), `status "sleeping": want one of queued, running`)

	// Empty: nothing matches, and the list says so.
	d.open("/?name=nothing+like+it")
	require.Equal(t, "0", d.b.eval(`String(document.querySelectorAll('#tasks tr').length)`))
	require.Equal(t, "No task matches these filters: show every task.", d.b.eval(`document.getElementById('empty').textContent`))

	// Live: a list filtered by name shows a new task of that name as it is
	// submitted, and not one of another name.
	d.open("/?name=late")
	require.Equal(t, "0", d.b.eval(`String(document.querySelectorAll('#tasks tr').length)`))
	d.b.eval(`window.stillTheSamePage = "yes"`)
	other := d.submit(plainTask("bulk import", wasm, "ok", ""))
	late := d.submit(plainTask("late arrival", wasm, "ok", ""))
	d.b.poll("the new task", fmt.Sprintf(`document.querySelector('#tasks tr[data-id="%s"]') !== null`, late))
	require.JSONEq(t, toJSON(t, []string{late}), d.b.eval(ids))
	require.NotContains(t, d.b.eval(ids), other)
	require.Equal(t, "yes", d.b.eval(`window.stillTheSamePage`))

	// Without scripts the form works the same: it is a GET form.
	require.NoError(t, chromedp.Do(d.b.ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		return tg.Call(ctx, "Emulation.setScriptExecutionDisabled", map[string]bool{"value": true}, &struct{}{})
	})))
	d.open("/")
	require.NoError(t, chromedp.Do(d.b.ctx, chromedp.SetValue(chromedp.ID("f-status"), "cancelled")))
	require.Equal(t, "/?status=cancelled&name=&id=&order=newest", d.follow("filter without scripts", "#f-apply"))
	require.JSONEq(t, toJSON(t, []string{weekly}), d.b.eval(ids))
}

// TestDashboardTaskPage drives a task's page in a headless Chromium: a
// task that fanned out, was repaired once, retried a unit and failed
// shows its steps numbered from 1 with their durations, a timeline of its
// passes and the repair, why it failed with the failed attempt's log, its
// variables; the events a person looks for, every event behind a link,
// and older events a page at a time; a fan-out's units a page at a time;
// and a task that never ran says, section by section, that there is
// nothing yet.
func TestDashboardTaskPage(t *testing.T) {
	d := startDash(t, 120*time.Second, dashOptions{})
	wasm := buildViewGuest(t)
	const pages = 230
	id := d.submit(showcaseTask(wasm, pages))
	task := d.run(id)
	require.Equal(t, ledger.Failed, task.Status)
	require.NotNil(t, task.Failure)
	d.login()
	require.Equal(t, "/tasks/"+id, d.open("/tasks/"+id))

	// Steps, numbered as lhengine status numbers them, each with the
	// duration of its latest pass.
	require.Equal(t, `[["1","fetch"],["2","draft"],["3","verify"],["4","flaky"],["5","publish"]]`,
		d.b.eval(list(`#steps tr[data-step]`, `r => [r.querySelector('.number').textContent, r.querySelector('.name').textContent]`)))
	for _, dur := range strings.Split(strings.Trim(d.b.eval(list(`#steps tr[data-step] .duration`, `c => c.textContent`)), "[]"), ",") {
		require.Regexp(t, `^"\d+(ms|s|m\d\ds)"$`, dur)
	}
	require.Equal(t, "the latest of 2 passes", d.b.eval(`document.querySelector('#step-1 .duration').title`))

	// The timeline: a bar per pass, in order, with how each ended, and the
	// repair between; each placed in the drawing.
	require.Equal(t, `[["1","1","done"],["2","1","done"],["3","1","sent back"],["3","1","repair"],`+
		`["2","2","done"],["3","2","done"],["4","1","done"],["5","1","failed"]]`,
		d.b.eval(list(`#timeline tr.bar`, `r => [r.dataset.step, r.dataset.pass, r.dataset.outcome]`)))
	require.Contains(t, d.b.eval(`document.querySelector('#timeline tr.repair .outcome').textContent`), `repair 1 of 2: back to "draft": the draft has no Risks section`)
	prevX := 0.0
	for i, xw := range parsePairs(t, d.b.eval(list(`#timeline tr.bar rect`, `r => [r.getAttribute('x'), r.getAttribute('width')]`))) {
		x, w := xw[0], xw[1]
		require.True(t, x >= 0 && w >= 3 && x+w <= 1000, "bar %d at %v width %v", i, x, w)
		require.GreaterOrEqual(t, x, prevX, "bar %d starts before the one above it", i) // in the order they started
		prevX = x
	}
	require.Equal(t, "rgb(30, 127, 79)", d.b.eval(`getComputedStyle(document.querySelector('#timeline tr.o-done rect')).fill`), "the stylesheet colours the bars")

	// Why it failed: the step, the failure, the attempt's log, and the
	// command that lists every attempt.
	require.Equal(t, "false", d.b.eval(`String(document.getElementById('failure').hidden)`))
	require.Equal(t, "Why it failed", d.b.eval(`document.querySelector('#failure h2').textContent`))
	require.Equal(t, "5 publish", d.b.eval(`document.getElementById('failure-step').textContent`))
	require.Equal(t, "plugin view.wasm: the report server answered 503", d.b.eval(`document.getElementById('failure-message').textContent`))
	require.True(t, strings.HasSuffix(strings.TrimSpace(d.b.eval(`document.getElementById('failure-log').textContent`)),
		"\npublishing to https://example.test\nerror: the server answered 503"), "the attempt's log, as recorded")
	require.Equal(t, "lhengine outputs "+id+" publish --attempts --item 0", d.b.eval(`document.getElementById('failure-command').textContent`))

	// The variables of the run manifest, by name.
	require.Equal(t, `[["pages","230"],["site","\"https://example.test\""]]`,
		d.b.eval(list(`#variables dt`, `dt => [dt.textContent, dt.nextElementSibling.textContent]`)))

	// Events: what a person looks for, newest first, no unit_done.
	types := list(`#events tr[data-seq]`, `r => r.querySelector('.ev').textContent`)
	seqs := list(`#events tr[data-seq]`, `r => Number(r.dataset.seq)`)
	require.Equal(t, `["failed","unit_failed","unit_retry","repair"]`, d.b.eval(types))
	require.Contains(t, d.b.eval(`document.getElementById('events-toggle').textContent`), "Show every event")
	require.Equal(t, "null", d.b.eval(`JSON.stringify(document.getElementById('events-older'))`), "all of them fit on the page")

	// Every event, behind a link: the newest 100, then older ones a page
	// at a time, and back.
	require.Equal(t, "/tasks/"+id+"?events=all", d.follow("every event", "#events-toggle"))
	all := parseInts(t, d.b.eval(seqs))
	require.Len(t, all, 100)
	require.Equal(t, int(task.NextEvent-1), all[0])
	require.Contains(t, d.b.eval(types), `"unit_done"`)
	older := d.follow("older events", "#events-older")
	require.Equal(t, "/tasks/"+id+"?events=all&events_before="+strconv.Itoa(all[99]), older)
	page2 := parseInts(t, d.b.eval(seqs))
	require.Len(t, page2, 100)
	require.Equal(t, all[99]-1, page2[0], "the next older event")
	require.Equal(t, "/tasks/"+id+"?events=all", d.follow("the newest events", "#events-newest"))
	require.Equal(t, "/tasks/"+id, d.follow("what needs a look", "#events-toggle"))

	// A fan-out's units, a page at a time.
	units := list(`#units-0 tr[data-item]`, `r => Number(r.dataset.item)`)
	require.Equal(t, "units: items 0–99 of 230", d.b.eval(`document.querySelector('#units-0 summary').textContent`))
	require.Len(t, parseInts(t, d.b.eval(units)), 100)
	d.b.eval(`document.getElementById('units-0').open = true, ""`)
	require.Equal(t, "/tasks/"+id+"?step=1&units_from=100", d.follow("the next units", "#units-0 .units-next"))
	require.Equal(t, "true", d.b.eval(`String(document.getElementById('units-0').open)`), "the page of units is open")
	got := parseInts(t, d.b.eval(units))
	require.Len(t, got, 100)
	require.Equal(t, 100, got[0])
	d.follow("the last units", "#units-0 .units-next")
	require.Equal(t, "units: items 200–229 of 230", d.b.eval(`document.querySelector('#units-0 summary').textContent`))
	require.Equal(t, "null", d.b.eval(`JSON.stringify(document.querySelector('#units-0 .units-next'))`))
	d.follow("back a page", "#units-0 .units-prev")
	require.Equal(t, "units: items 100–199 of 230", d.b.eval(`document.querySelector('#units-0 summary').textContent`))

	// Sections with something, and what a task that never ran shows
	// instead: a sentence each.
	require.Contains(t, d.b.eval(`document.querySelector('#progress-notes .note-item').textContent`), "the front page has no description")
	empty := d.submit(plainTask("never ran", wasm, "ok", ""))
	d.open("/tasks/" + empty)
	for sel, want := range map[string]string{
		"no-approvals": "No approvals: nothing of this task has asked a person yet.",
		"no-budgets":   "No budget limits: the task file's budget block sets none.",
		"no-effects":   "No effects: no step has performed one (effect.do) yet.",
		"no-events":    "No events that need a look yet.",
		"no-variables": "No variables: the task file declares none.",
		"no-counters":  "No counters yet: a step counts with progress.count.",
		"no-notes":     "No notes yet: findings, decisions and blockers the steps record show here.",
		"no-artifacts": "No artifacts yet.",
		"no-outputs":   "No step has completed yet.",
	} {
		require.Equal(t, want, d.b.eval(`document.getElementById('`+sel+`').textContent`), sel)
	}
	require.Equal(t, "true", d.b.eval(`String(document.getElementById('failure').hidden)`))
	// Its one step was entered at submission, and waits.
	require.Equal(t, `[["1","1","queued"]]`, d.b.eval(list(`#timeline tr.bar`, `r => [r.dataset.step, r.dataset.pass, r.dataset.outcome]`)))
}

// TestDashboardOnceLogin: the one-time login link lhengine serve prints
// logs a browser in (the task list, with the home's token in the session
// cookie); the same link used again, from a browser without the cookie,
// shows the login page saying it was used; a link past its 15 minutes, or
// one the server never issued, says so too; and the server's log never
// holds a link's secret.
func TestDashboardOnceLogin(t *testing.T) {
	var logged strings.Builder
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	once := server.NewOnceLogins(server.OnceLoginFor, clock)
	d := startDash(t, 60*time.Second, dashOptions{
		wrap: func(_ *server.Server, h http.Handler) http.Handler {
			return once.Handler(h, func() (map[string]string, error) {
				return map[string]string{homefiles.OwnerToken: "view-token-0123456789"}, nil
			})
		},
		logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: lockedWriter{&mu, &logged}}),
	})
	secret, err := once.Issue(homefiles.OwnerToken)
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f]{64}$`, secret, "32 random bytes")
	link := "/login?once=" + secret

	// The link: the task list, logged in.
	require.Equal(t, "/", d.open(link))
	require.Equal(t, "list", d.b.eval(`document.body.dataset.page`))
	require.Equal(t, "/", d.open("/"), "the session cookie lets the browser in")

	// Again, from a browser that has no cookie: the login page says why.
	fresh, cancel := chromedp.NewContext(d.b.ctx, chromedp.WithNewBrowserContext())
	defer cancel()
	again := &dash{t: t, ctx: d.ctx, base: d.base, b: browser{t: t, ctx: fresh}}
	require.Equal(t, link, again.open(link))
	require.Equal(t, "login", again.b.eval(`document.body.dataset.page`))
	require.Equal(t, "That login link was already used: a link printed by lhengine serve works once. "+
		"Log in with a token below, or restart lhengine serve for a new link.", again.b.eval(`document.getElementById('once-refused').textContent`))
	require.Equal(t, "/login", again.open("/"), "still not logged in")

	// A link past its time, and one never issued.
	late, err := once.Issue(homefiles.OwnerToken)
	require.NoError(t, err)
	mu.Lock()
	now = now.Add(server.OnceLoginFor)
	mu.Unlock()
	again.open("/login?once=" + late)
	require.Contains(t, again.b.eval(`document.getElementById('once-refused').textContent`), "That login link has expired: a link printed by lhengine serve works for 15 minutes.")
	again.open("/login?once=0123")
	require.Contains(t, again.b.eval(`document.getElementById('once-refused').textContent`), "That login link is not known to this server")
	require.Equal(t, "/login", again.open("/"))

	mu.Lock()
	defer mu.Unlock()
	require.NotContains(t, logged.String(), secret)
	require.NotContains(t, logged.String(), late)
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// parseInts reads a JSON list of numbers.
func parseInts(t *testing.T, js string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.FieldsFunc(strings.Trim(js, "[]"), func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(t, err, js)
		out = append(out, n)
	}
	return out
}

// parsePairs reads a JSON list of pairs of numbers written as strings.
func parsePairs(t *testing.T, js string) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, m := range regexp.MustCompile(`\["([-0-9.]+)","([-0-9.]+)"\]`).FindAllStringSubmatch(js, -1) {
		x, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		w, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		out = append(out, [2]float64{x, w})
	}
	require.NotEmpty(t, out, js)
	return out
}

func toJSON(t *testing.T, ids []string) string {
	t.Helper()
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	return "[" + strings.Join(q, ",") + "]"
}
