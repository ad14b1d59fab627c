package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/server"
	"github.com/lhengine/lhengine/store"
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
func (d *dash) run(id string) *store.Task {
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
		require.Equal(t, store.Succeeded, d.run(id).Status)
		docs = append(docs, id)
	}
	shop := d.submit(plainTask("audit shop", wasm, "fail", `, message = "the shop answered 503"`))
	require.Equal(t, store.Failed, d.run(shop).Status)
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

func toJSON(t *testing.T, ids []string) string {
	t.Helper()
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	return "[" + strings.Join(q, ",") + "]"
}
