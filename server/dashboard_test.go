package server_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/server"
)

// chromium returns the browser to drive. A machine without one fails the
// test: the dashboard is tested in a browser or not at all.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: install Debian's package chromium (bash scripts/deps.sh)")
	return ""
}

// dashTask is a task of two steps: "fetch" fans out over pages, one at a
// time, each fetched from the receiver when the test releases it; "notify"
// sends an http effect under mode manual to a receiver that drops the
// connection, so its outcome becomes unknown and waits for a person.
func dashTask(name, wasm, world string, pages int, path string) string {
	return fmt.Sprintf(`
task %q {
  objective   = "Fetch every page of the docs site, then tell the team"
  constraints = ["read only", "one page at a time"]

  step "fetch" {
    plugin      = %q
    for_each    = range(%d)
    concurrency = 1
    input       = { mode = "fetch", url = "%s%s" }
    http {
      allow = ["127.0.0.1:*"]
    }
  }

  step "notify" {
    plugin = %q
    input  = { mode = "effect", url = "%s/notify" }
    effect "http" {
      hosts = ["127.0.0.1:*"]
      mode  = "manual"
    }
    retry {
      attempts = 3
      backoff  = "0s"
    }
  }
}
`, name, wasm, pages, world, path, wasm, world)
}

// TestDashboardInABrowser drives the dashboard in a headless Chromium
// against a real engine and its workers: login, the task list following
// the store, a task's progress advancing live as the test lets each unit
// through, an effect of unknown outcome confirmed with its button, a task
// cancelled with its button (and the same post from another site refused);
// each result is checked in the page and in the store.
func TestDashboardInABrowser(t *testing.T) { dashboardInABrowser(t, "") }

// TestDashboardInABrowserOnPostgres is TestDashboardInABrowser with the
// ledger in PostgreSQL: the dashboard works the same on both stores.
func TestDashboardInABrowserOnPostgres(t *testing.T) { dashboardInABrowser(t, testpg.DB(t)) }

// dashboardInABrowser is TestDashboardInABrowser on the store at
// storeURL ("" for the embedded one in the home).
func dashboardInABrowser(t *testing.T, storeURL string) {
	chrome := chromium(t)
	wasm := buildDashGuest(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The engine, its workers, and the API with the dashboard behind a token.
	home := t.TempDir()
	e, err := engine.Open(ctx, engine.Config{Home: home, Store: storeURL, MigrateStore: storeURL != ""})
	require.NoError(t, err)
	rv := newReceiver()
	world := httptest.NewServer(rv)
	workCtx, stopWork := context.WithCancel(ctx)
	worked := make(chan error, 1)
	go func() {
		worked <- e.Work(workCtx, engine.WorkOptions{Concurrency: 4, PollEvery: 20 * time.Millisecond})
	}()

	const token = "test-token-0123456789"
	srv := server.New(e, server.Options{Dashboard: true, Logger: testLogger(t), Owner: api.Owner{Home: home, Works: "all", Command: "lhengine serve"}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, l, server.RequireToken(srv.Handler(), token), time.Second) }()
	base := "http://" + l.Addr().String()
	defer func() {
		stopServe()
		require.NoError(t, <-served)
		stopWork()
		close(rv.stop)
		if err := <-worked; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Work: %v", err)
		}
		world.Close()
		require.NoError(t, e.Close(context.Background()))
	}()

	submit := func(name, path string, pages int) *ledger.Task {
		t.Helper()
		file := filepath.Join(t.TempDir(), "task.hcl")
		require.NoError(t, os.WriteFile(file, []byte(dashTask(name, wasm, world.URL, pages, path)), 0o644))
		task, _, err := e.Submit(ctx, file, engine.SubmitOptions{})
		require.NoError(t, err)
		return task
	}
	stored := func(id string) *ledger.Task {
		t.Helper()
		task, err := e.Task(ctx, id)
		require.NoError(t, err)
		return task
	}

	// The browser.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	b, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	// showPage logs where the browser is and what it shows.
	showPage := func() {
		t.Helper()
		sctx, cancel := context.WithTimeout(b, 2*time.Second)
		defer cancel()
		loc, _ := chromedp.Run(sctx, chromedp.Location())
		text, _ := chromedp.Run(sctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Logf("the browser is at %s, showing:\n%s", loc, text)
	}
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		wctx, cancel := context.WithTimeout(b, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, actions...); err != nil {
			showPage()
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll := func(what, js string) {
		t.Helper()
		if _, err := chromedp.Run(b, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			showPage()
			t.Fatalf("waiting in the page for %s: %s: %v", what, js, err)
		}
	}
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(b, chromedp.Evaluate[string](js))
		require.NoError(t, err, js)
		return v
	}
	// navigate runs actions that load a page (a link, a form) and returns
	// the final URL's path once the page loaded.
	navigate := func(what string, actions ...chromedp.Action[chromedp.Void]) string {
		t.Helper()
		resp, err := chromedp.RunResponse(b, actions...)
		require.NoError(t, err, what)
		require.Equal(t, 200, int(resp.Status), "%s: %s", what, resp.URL)
		u, err := url.Parse(resp.URL)
		require.NoError(t, err)
		return u.Path
	}

	// 1. Without a token the dashboard sends the browser to the login page;
	// a wrong token is refused there, the right one leads to the task list.
	require.Equal(t, "/login", navigate("open the dashboard", chromedp.Navigate(base+"/")))
	require.Equal(t, "/login", navigate("log in with a wrong token",
		chromedp.SendKeys(chromedp.ID("token"), "wrong"), chromedp.Click(chromedp.ID("login"))))
	do("see the refusal", chromedp.WaitVisible(chromedp.ID("refused")))
	require.Equal(t, "/", navigate("log in", chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login"))))
	do("the task list", chromedp.WaitReady(chromedp.CSS(`body[data-page="list"]`)))

	// 2. A task submitted now appears in the open list, its user-given name
	// shown as text.
	const name = "nightly crawl <b>docs</b>"
	a := submit(name, "/page", 4)
	row := fmt.Sprintf(`document.querySelector('#tasks tr[data-id="%s"]')`, a.ID)
	poll("the new task in the list", row+` !== null`)
	require.Equal(t, name, eval(row+`.querySelector('.name').textContent`))
	require.Equal(t, "0", eval(`String(document.querySelectorAll('#tasks b').length)`), "the name is text, not markup")

	// 3. Its page: the fan-out advances one unit each time the test lets a
	// fetch through, without the page reloading. The events follow as the
	// page filters them: with every event asked for, each unit_done comes
	// in; with what needs a look (the default), none does.
	require.Equal(t, "/tasks/"+a.ID, navigate("open the task", chromedp.Click(chromedp.CSS(`#tasks tr[data-id="`+a.ID+`"] a`))))
	require.Equal(t, name, eval(`document.getElementById('name').textContent`))
	require.Equal(t, "Fetch every page of the docs site, then tell the team", eval(`document.getElementById('objective').textContent`))
	require.Equal(t, "/tasks/"+a.ID, navigate("every event", chromedp.Click(chromedp.ID("events-toggle"))))
	require.Equal(t, "all", eval(`new URL(location.href).searchParams.get('events')`))
	for done := 1; done <= 4; done++ {
		if done == 1 || done == 3 {
			if done == 3 {
				require.Equal(t, "/tasks/"+a.ID, navigate("what needs a look", chromedp.Click(chromedp.ID("events-toggle"))))
				require.Equal(t, "", eval(`location.search`))
			}
			eval(`window.stillTheSamePage = "yes"`)
			poll("the event stream connected", `!document.getElementById('live').hidden`)
		}
		select {
		case rv.release <- struct{}{}:
		case <-ctx.Done():
			t.Fatalf("no fetch came for page %d", done)
		}
		poll(fmt.Sprintf("progress %d of 5", done), fmt.Sprintf(
			`document.getElementById('progress').value === %d && document.getElementById('progress-text').textContent === "%d / 5"`, done, done))
		// The status line (lhengine status's first line) follows the same
		// stream: the count of the step at work (the fan-out's 4) in
		// units, the time left or that it is unknown.
		poll(fmt.Sprintf("the progress line at %d", done), fmt.Sprintf(
			`(l => l.startsWith(%s) && l.includes(" · %d / 4 units (") && (l.includes(" left") || l.includes("time left unknown")))(document.getElementById('progress-line').textContent)`,
			jsString(name+" · "), done))
		if done <= 2 {
			poll(fmt.Sprintf("the unit_done of item %d", done-1), fmt.Sprintf(
				`[...document.querySelectorAll('#events tr.new')].some(r => r.querySelector('.ev').textContent === "unit_done" && r.cells[4].textContent === "%d")`, done-1))
		}
		require.Equal(t, "yes", eval(`window.stillTheSamePage`), "the page was not reloaded")
		if done < 4 {
			// Nothing else lets a unit through: the store says the same.
			got := stored(a.ID)
			require.Equal(t, done, got.Steps[0].Done)
			require.Equal(t, ledger.Running, got.Status)
			poll("the step row", fmt.Sprintf(`document.querySelector('#step-0 .done').textContent === "%d"`, done))
		}
	}
	require.Equal(t, "1", eval(`document.querySelector('#step-0 .number').textContent`), "steps are numbered from 1, as lhengine status does")

	// 4. notify's effect is sent, its connection dropped: the retry finds
	// an intent without outcome under mode manual and the task waits for a
	// person. The page shows it, with the buttons, without a reload.
	confirm := `#effects tr.e-unknown[data-key="notify-team"] button.confirm`
	poll("the effect waiting for a person",
		`document.getElementById('status').textContent === "paused" && document.querySelector('`+confirm+`') !== null`)
	require.Equal(t, "yes", eval(`window.stillTheSamePage`))
	// The events that need a look came in live; the routine ones did not.
	poll("the pause in the events", `document.querySelector('#events tr.new .ev-paused') !== null && document.querySelector('#events tr.new .ev-effect_unknown') !== null`)
	require.Equal(t, "[]", eval(`JSON.stringify([...document.querySelectorAll('#events .ev')].map(e => e.textContent).filter(t => t === "unit_done" || t === "step_done" || t === "step_started"))`))
	require.Equal(t, ledger.Paused, stored(a.ID).Status)
	effs := effects(t, e, a.ID)
	require.Len(t, effs, 1)
	require.Equal(t, ledger.EffectUnknown, effs[0].State)
	require.Equal(t, "manual", effs[0].Mode)
	sent := rv.notified()
	require.Positive(t, sent)
	poll("the artifact", `document.querySelector('#artifacts a') !== null`)
	href := eval(`document.querySelector('#artifacts a').getAttribute('href')`)
	require.True(t, strings.HasPrefix(href, "/v1/artifacts/sha256:"), href)
	body, err := chromedp.Run(b, chromedp.Evaluate[string](`fetch(`+jsString(href)+`).then(r => r.text())`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Equal(t, "<html><body>the front page</body></html>", body, "the artifact downloads with the login cookie")

	// 5. Confirm: the effect is recorded as done and never sent again; the
	// step goes on with the confirmed outcome and the task succeeds.
	require.Equal(t, "/tasks/"+a.ID, navigate("confirm the effect",
		chromedp.SendKeys(chromedp.CSS(`#effects tr.e-unknown input[name="note"]`), "seen in the team's inbox"),
		chromedp.Click(chromedp.CSS(confirm))))
	poll("the effect done", `document.querySelector('#effects tr.e-done[data-key="notify-team"]') !== null`)
	effs = effects(t, e, a.ID)
	require.Equal(t, ledger.EffectDone, effs[0].State)
	require.Equal(t, "seen in the team's inbox", effs[0].Note)
	poll("the task succeeded", `document.getElementById('status').textContent === "succeeded"`)
	poll("the progress line at the end", `(l => l.startsWith(`+jsString(name+" · succeeded ")+`) && l.includes(" units (100%)"))(document.getElementById('progress-line').textContent)`)
	poll("the output of notify", `document.getElementById('outputs').textContent.includes('"reconciled": "confirmed"')`)
	poll("the note", `document.getElementById('progress-notes').textContent.includes('told the team <script>')`)
	require.Equal(t, "0", eval(`String(document.querySelectorAll('#progress-notes script').length)`), "a note is text, not markup")
	require.Equal(t, ledger.Succeeded, stored(a.ID).Status)
	require.Equal(t, sent, rv.notified(), "a confirmed effect is not sent again")

	// 6. Cancel: a task whose unit is running. A post from another site is
	// refused; the button works.
	c := submit("held", "/hold", 1)
	select {
	case <-rv.held:
	case <-ctx.Done():
		t.Fatal("the held task never ran")
	}
	require.Equal(t, "/tasks/"+c.ID, navigate("open the held task", chromedp.Navigate(base+"/tasks/"+c.ID)))
	poll("running", `document.getElementById('status').textContent === "running"`)

	req, err := http.NewRequestWithContext(ctx, "POST", base+"/tasks/"+c.ID+"/cancel", strings.NewReader(""))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Cookie", "lhengine_token="+token)
	req.Header.Set("Origin", "http://attacker.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a cross-site post")
	require.Equal(t, ledger.Running, stored(c.ID).Status, "a cross-site post changes nothing")

	require.Equal(t, "/tasks/"+c.ID, navigate("cancel", chromedp.Click(chromedp.ID("cancel"))))
	poll("cancelled", `document.getElementById('status').textContent === "cancelled" && document.getElementById('retry') !== null`)
	got := stored(c.ID)
	require.Equal(t, ledger.Cancelled, got.Status)
	require.Equal(t, "cancelled from the dashboard", got.Reason)
}

// testLogger logs the server's errors to the test's log.
func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "server", Level: hclog.Error, Output: testWriter{t}})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func effects(t *testing.T, e *engine.Engine, id string) []ledger.Effect {
	t.Helper()
	var out []ledger.Effect
	require.NoError(t, e.Read(func(r ledger.Reader) error {
		var err error
		out, err = r.Effects(id)
		return err
	}))
	return out
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// TestDashboardPages checks, without a browser, what the browser test
// cannot see from inside the page: the login cookie's attributes, the
// escaping of names in the served HTML, the pages' security headers, the
// task list stream of the API, and posts from other sites refused while
// posts from the dashboard's own pages act.
func TestDashboardPages(t *testing.T) {
	t.Parallel()
	wasm := buildDashGuest(t)
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Config{Home: t.TempDir()})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close(ctx)) }()
	file := filepath.Join(t.TempDir(), "task.hcl")
	require.NoError(t, os.WriteFile(file, []byte(dashTask(`<script>alert("name")</script>`, wasm, "http://127.0.0.1:9", 2, "/page")), 0o644))
	task, _, err := e.Submit(ctx, file, engine.SubmitOptions{})
	require.NoError(t, err)

	const token = "a-token"
	srv := server.New(e, server.Options{Dashboard: true, Logger: testLogger(t)})
	once := server.NewOnceLogins(server.OnceLoginFor, nil)
	hs := httptest.NewServer(once.Handler(server.RequireToken(srv.Handler(), token),
		func() (map[string]string, error) { return map[string]string{homefiles.OwnerToken: token}, nil }))
	defer hs.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path string, form url.Values, header map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		if method == "POST" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	read := func(resp *http.Response) string {
		t.Helper()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	cookie := map[string]string{"Cookie": "lhengine_token=" + token}

	// Login: the token goes into an HttpOnly, SameSite=Strict cookie.
	resp := send("POST", "/login", url.Values{"token": {token}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/", resp.Header.Get("Location"))
	var got *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "lhengine_token" {
			got = c
		}
	}
	require.NotNil(t, got)
	require.Equal(t, token, got.Value)
	require.True(t, got.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, got.SameSite)
	require.Equal(t, "/", got.Path)
	require.Equal(t, http.StatusSeeOther, send("GET", "/tasks/"+task.ID, nil, nil).StatusCode, "no token: to the login page")

	// A one-time link sets the same cookie and leads to the task list;
	// used again, it leads to the login page, which says so.
	secret, err := once.Issue(homefiles.OwnerToken)
	require.NoError(t, err)
	resp = send("GET", "/login?once="+secret, nil, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/", resp.Header.Get("Location"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Len(t, resp.Cookies(), 1)
	got = resp.Cookies()[0]
	require.Equal(t, "lhengine_token", got.Name)
	require.Equal(t, token, got.Value)
	require.True(t, got.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, got.SameSite)
	resp = send("GET", "/login?once="+secret, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.Cookies())
	require.Contains(t, read(resp), `<p class="error" id="once-refused">That login link was already used`)

	// A query a page does not understand is refused with a page that says
	// why, never a failure of the server.
	for path, want := range map[string]string{
		"/?page=0":                                    `page &#34;0&#34;: want a page number`,
		"/?order=sideways":                            `order &#34;sideways&#34;: want newest or oldest`,
		"/tasks/" + task.ID + "?events=some":          `events &#34;some&#34;: want all`,
		"/tasks/" + task.ID + "?events_before=x":      `events_before &#34;x&#34;: want an event&#39;s sequence number`,
		"/tasks/" + task.ID + "?step=9":               `step &#34;9&#34;: want a step number from 1 to 2`,
		"/tasks/" + task.ID + "?step=1&units_from=-1": `units_from &#34;-1&#34;: want an item number`,
	} {
		resp := send("GET", path, nil, cookie)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, path)
		require.Contains(t, read(resp), want, path)
	}

	// The pages escape what users and plugins wrote, and forbid inline
	// scripts and framing.
	for _, path := range []string{"/", "/tasks/" + task.ID} {
		resp := send("GET", path, nil, cookie)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		html := read(resp)
		require.NotContains(t, html, `<script>alert`, path)
		require.Contains(t, html, `&lt;script&gt;alert(&#34;name&#34;)&lt;/script&gt;`, path)
		csp := resp.Header.Get("Content-Security-Policy")
		require.Regexp(t, `style-src 'sha256-[A-Za-z0-9+/]+=*';`, csp, path+": the stylesheet by its hash, nothing inline")
		require.NotContains(t, csp, "unsafe", path)
		require.Contains(t, csp, "script-src 'self'", path)
		require.Contains(t, csp, "frame-ancestors 'none'", path)
		require.NotContains(t, html, "http://", path+": the dashboard loads nothing from elsewhere")
	}

	// The task page shows what the run pinned: the engine version, the
	// source's sha256, the policies (none here).
	page := read(send("GET", "/tasks/"+task.ID, nil, cookie))
	var version, source string
	require.NoError(t, e.Read(func(r ledger.Reader) error {
		pinned, err := r.Manifest(task.ID)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(pinned.Source)
		version, source = pinned.EngineVersion, hex.EncodeToString(sum[:])
		return nil
	}))
	require.Contains(t, page, `<h2>Run manifest</h2>`)
	require.Contains(t, page, version+" · ABI ")
	require.Contains(t, page, `title="`+source+`">`+source[:12]+`</dd>`)
	require.Contains(t, page, `<dt>policies</dt><dd>none</dd>`)

	// The task list stream starts with the whole list.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel() // before the server closes
	req, err := http.NewRequestWithContext(sctx, "GET", hs.URL+"/v1/tasks?follow=1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "event: tasks\n", line)
	line, err = br.ReadString('\n')
	require.NoError(t, err)
	var list []api.Task
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &list))
	require.Len(t, list, 1)
	require.Equal(t, task.ID, list[0].ID)
	require.Equal(t, string(ledger.Queued), list[0].ShownStatus)

	// Posts from elsewhere are refused, by Sec-Fetch-Site or by Origin;
	// the dashboard's own act, and a failed act shows the API's error.
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"}, // another port of the same host
		{"Origin": "http://attacker.example"},
	} {
		h["Cookie"] = cookie["Cookie"]
		for _, action := range []string{"cancel", "pause", "approvals/1/approve", "approvals/1/reject"} {
			require.Equal(t, http.StatusForbidden, send("POST", "/tasks/"+task.ID+"/"+action, nil, h).StatusCode, "%s %v", action, h)
		}
	}
	stored, err := e.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Queued, stored.Status)

	own := map[string]string{"Cookie": cookie["Cookie"], "Sec-Fetch-Site": "same-origin", "Origin": hs.URL}

	// A button keeps the view it was pressed in (here all events): the
	// page's forms carry its address, and the redirect returns there, but
	// never to another page.
	resp = send("GET", "/tasks/"+task.ID[:12]+"?events=all", nil, cookie)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	view := "/tasks/" + task.ID + "?events=all"
	require.Contains(t, read(resp), `name="back" value="`+view+`"`)
	resp = send("POST", "/tasks/"+task.ID+"/pause", url.Values{"back": {view}}, own)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, view, resp.Header.Get("Location"))
	for _, elsewhere := range []string{"https://attacker.example/", "//attacker.example/x", "/tasks/OTHER?events=all", "/tasks/" + task.ID + "x?a=1"} {
		resp = send("POST", "/tasks/"+task.ID+"/resume", url.Values{"back": {elsewhere}}, own)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, elsewhere)
		require.Equal(t, "/tasks/"+task.ID, resp.Header.Get("Location"), elsewhere)
		resp = send("POST", "/tasks/"+task.ID+"/pause", nil, own)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	}

	resp = send("POST", "/tasks/"+task.ID+"/cancel", nil, own)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/tasks/"+task.ID, resp.Header.Get("Location"))
	stored, err = e.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Cancelled, stored.Status)

	resp = send("POST", "/tasks/"+task.ID+"/effects/confirm", url.Values{"step": {"notify"}, "item": {"0"}, "key": {"nope"}}, own)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, read(resp), "not found")
	resp = send("POST", "/tasks/"+task.ID+"/retry", url.Values{"from": {"no-such-step"}}, own)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, read(resp), "has no step")
}
