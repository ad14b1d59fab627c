package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/internal/testgate"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/server"
)

// controlTask fans out over n items of the pipeline guest, one at a time;
// item 1 waits for a person's approval when approval is set, and budget
// is the task's budget block ("" for none).
func controlTask(name string, n int, approval bool, budget string) string {
	a := ""
	if approval {
		a = `
    approval {
      when    = each.value == 1
      prompt  = "Deploy item ${each.value} to prod?"
      subject = { item = each.value, target = "prod <eu>" }
    }`
	}
	return fmt.Sprintf(`
task %q {
  %s
  step "each" {
    plugin      = "step.wasm"
    for_each    = range(%d)
    concurrency = 1
    input       = { mode = "echo", n = each.value }%s
  }
}
`, name, budget, n, a)
}

// browser drives one headless Chromium tab.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// show logs where the browser is and what it shows.
func (b browser) show() {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(sctx, chromedp.Location())
	text, _ := chromedp.Run(sctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	b.t.Logf("the browser is at %s, showing:\n%s", loc, text)
}

// poll waits until js is true in the page.
func (b browser) poll(what, js string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		b.show()
		b.t.Fatalf("waiting in the page for %s: %s: %v", what, js, err)
	}
}

func (b browser) eval(js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	require.NoError(b.t, err, js)
	return v
}

// navigate runs actions that load a page (a link, a form) and returns the
// final URL's path once it loaded with status 200.
func (b browser) navigate(what string, actions ...chromedp.Action[chromedp.Void]) string {
	b.t.Helper()
	resp, err := chromedp.RunResponse(b.ctx, actions...)
	if err != nil {
		b.show()
	}
	require.NoError(b.t, err, what)
	require.Equal(b.t, 200, int(resp.Status), "%s: %s", what, resp.URL)
	u, err := url.Parse(resp.URL)
	require.NoError(b.t, err)
	return u.Path
}

// TestDashboardAgentControls drives, in a headless Chromium logged in with
// alice's named token, the dashboard's controls of tasks that wait for
// people: the task list's "Waiting for you" (appearing live), an approval
// approved there with a note and a rejection from the task's page, each
// checked in the store (recorded as made by alice, through the dashboard)
// and in what the tasks then do; a running task paused with a reason; a
// budget's usage, its warning and, once reached, the command that raises
// it, and the button that raises it and resumes.
func TestDashboardAgentControls(t *testing.T) {
	chrome := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	dir := t.TempDir()
	testwasm.Copy(t, testwasm.CGuest(t, "pipeline"), filepath.Join(dir, "step.wasm"))
	testwasm.Copy(t, testwasm.CGuest(t, "gate"), filepath.Join(dir, "gate.wasm"))
	g := testgate.New(t)

	home := filepath.Join(dir, "home")
	e, err := engine.Open(ctx, engine.Config{Home: home})
	require.NoError(t, err)
	_, err = homefiles.Token(home)
	require.NoError(t, err)
	alice, err := homefiles.AddToken(home, "alice")
	require.NoError(t, err)
	workCtx, stopWork := context.WithCancel(ctx)
	worked := make(chan error, 1)
	go func() {
		worked <- e.Work(workCtx, engine.WorkOptions{Concurrency: 4, PollEvery: 20 * time.Millisecond})
	}()
	srv := server.New(e, server.Options{Dashboard: true, Logger: testLogger(t), Owner: api.Owner{Home: home, Works: "all", Command: "lhengine serve"}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(serveCtx, l, server.RequireTokens(srv.Handler(), func() (map[string]string, error) { return homefiles.Tokens(home) }), time.Second)
	}()
	base := "http://" + l.Addr().String()
	defer func() {
		stopServe()
		require.NoError(t, <-served)
		stopWork()
		g.Open()
		if err := <-worked; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Work: %v", err)
		}
		require.NoError(t, e.Close(context.Background()))
	}()

	submit := func(name, src string) *ledger.Task {
		t.Helper()
		file := filepath.Join(dir, name+".hcl")
		require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
		task, _, err := e.Submit(ctx, file, engine.SubmitOptions{})
		require.NoError(t, err)
		return task
	}
	// until waits for cond to hold of the task in the store.
	until := func(id, what string, cond func(*ledger.Task) bool) *ledger.Task {
		t.Helper()
		for {
			changed := e.Changed()
			got, err := e.Task(ctx, id)
			require.NoError(t, err)
			if cond(got) {
				return got
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("task %s: no %s; it is %s (%s)", id, what, got.Status, got.Reason)
			}
		}
	}
	status := func(st ledger.Status) func(*ledger.Task) bool {
		return func(t *ledger.Task) bool { return t.Status == st }
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	b := browser{t: t, ctx: bctx}

	// 1. Log in with alice's token; the list is open before any task.
	require.Equal(t, "/login", b.navigate("open the dashboard", chromedp.Navigate(base+"/")))
	require.Equal(t, "/", b.navigate("log in", chromedp.SendKeys(chromedp.ID("token"), alice), chromedp.Click(chromedp.ID("login"))))
	require.Equal(t, "true", b.eval(`String(document.getElementById('waiting').hidden)`), "nothing waits yet")
	b.eval(`window.stillTheSamePage = "yes"`)

	// 2. Two tasks run to their approval of item 1 while the list is open:
	// "Waiting for you" shows both, live, with prompt and subject as text;
	// the tasks' status is waiting_approval, in its own colour.
	ship := submit("ship", controlTask("ship", 5, true, "budget {\n    units = 5\n  }"))
	hold := submit("hold", controlTask("hold", 3, true, ""))
	until(ship.ID, "waiting_approval", status(ledger.WaitingApproval))
	until(hold.ID, "waiting_approval", status(ledger.WaitingApproval))
	shipRow := fmt.Sprintf(`#waiting tr[data-task="%s"][data-approval="1"]`, ship.ID)
	holdRow := fmt.Sprintf(`#waiting tr[data-task="%s"][data-approval="1"]`, hold.ID)
	b.poll("both approvals waiting", `!document.getElementById('waiting').hidden && document.querySelector('`+shipRow+`') !== null && document.querySelector('`+holdRow+`') !== null`)
	require.Equal(t, "yes", b.eval(`window.stillTheSamePage`), "the list was not reloaded")
	require.Equal(t, "Deploy item 1 to prod?", b.eval(`document.querySelector('`+shipRow+` .prompt').textContent`))
	require.Equal(t, "ship", b.eval(`document.querySelector('`+shipRow+` a').textContent`))
	require.Contains(t, b.eval(`document.querySelector('`+shipRow+` .subject pre').textContent`), `"target": "prod <eu>"`)
	b.poll("the status badge", fmt.Sprintf(`document.querySelector('#tasks tr[data-id="%s"] .status').textContent === "waiting_approval"`, ship.ID))
	require.Equal(t, "rgb(255, 240, 214)", b.eval(fmt.Sprintf(`getComputedStyle(document.querySelector('#tasks tr[data-id="%s"] .status')).backgroundColor`, ship.ID)),
		"waiting_approval has the colour of a task that waits for a person")

	// ship's page shows the same approval with its buttons, and its units
	// budget at the warning: 4 of 5 while item 1 waits.
	require.Equal(t, "/tasks/"+ship.ID, b.navigate("open ship", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tasks tr[data-id="%s"] a`, ship.ID)))))
	require.Equal(t, "waiting_approval", b.eval(`document.getElementById('status').textContent`))
	require.Equal(t, "Deploy item 1 to prod?", b.eval(`document.querySelector('#approvals tr.a-pending[data-approval="1"] .prompt').textContent`))
	require.Equal(t, "4 5 80% warning", b.eval(`['.used', '.limit', '.pct'].map(c => document.querySelector('#budgets tr[data-budget="units"] '+c).textContent).join(' ')`))
	require.Equal(t, "true", b.eval(`String(document.querySelector('#budgets tr[data-budget="units"]').classList.contains('b-warn'))`))
	require.Equal(t, "true", b.eval(`String(document.getElementById('pause') !== null)`), "a task waiting for approval can be paused")
	require.Equal(t, "/", b.navigate("back to the list", chromedp.Click(chromedp.CSS(`header nav a`))))
	b.poll("the approvals on the list", `document.querySelector('`+shipRow+`') !== null`)

	// 3. Approve ship's from the list, with a note: the browser comes back
	// to the list; the store has the decision, by alice through the
	// dashboard (the body's "dashboard" is not who), and the task finishes,
	// item 1 run once.
	require.Equal(t, "/", b.navigate("approve from the list",
		chromedp.SendKeys(chromedp.CSS(shipRow+` input[name="note"]`), "checked the diff"),
		chromedp.Click(chromedp.CSS(shipRow+` button.approve`))))
	got := until(ship.ID, "success", status(ledger.Succeeded))
	require.Equal(t, 5, got.Attempts, "every item ran once")
	as := approvalsOf(t, e, ship.ID)
	require.Len(t, as, 1)
	require.Equal(t, ledger.ApprovalApproved, as[0].State)
	require.Equal(t, "alice via dashboard", as[0].DecidedBy)
	require.Equal(t, "checked the diff", as[0].Note)
	b.poll("ship's approval gone from the list", `document.querySelector('`+shipRow+`') === null && document.querySelector('`+holdRow+`') !== null`)

	// 4. ship's page: the decision in the approvals' history, the budget
	// used up to its limit.
	require.Equal(t, "/tasks/"+ship.ID, b.navigate("open ship", chromedp.Navigate(base+"/tasks/"+ship.ID)))
	closed := `#approvals tr.a-approved[data-approval="1"]`
	b.poll("the history", `document.querySelector('`+closed+`') !== null`)
	require.Equal(t, "alice via dashboard", b.eval(`document.querySelector('`+closed+` .by').textContent`))
	require.Equal(t, "checked the diff", b.eval(`document.querySelector('`+closed+` .note').textContent`))
	require.Equal(t, "0", b.eval(`String(document.querySelectorAll('#approvals form').length)`), "nothing left to decide")
	require.Equal(t, "5 5 100% reached", b.eval(`['.used', '.limit', '.pct'].map(c => document.querySelector('#budgets tr[data-budget="units"] '+c).textContent).join(' ')`))

	// 5. Reject hold's from its page: the unit fails with the note, and
	// so does the task; the page shows the rejection.
	require.Equal(t, "/tasks/"+hold.ID, b.navigate("open hold", chromedp.Navigate(base+"/tasks/"+hold.ID)))
	pendingRow := `#approvals tr.a-pending[data-approval="1"]`
	b.poll("the pending approval", `document.querySelector('`+pendingRow+` button.reject') !== null`)
	require.Equal(t, "1 waiting for you", b.eval(`document.querySelector('#approvals .attention').textContent`))
	require.Equal(t, "/tasks/"+hold.ID, b.navigate("reject",
		chromedp.SendKeys(chromedp.CSS(pendingRow+` input[name="note"]`), "not on a Friday"),
		chromedp.Click(chromedp.CSS(pendingRow+` button.reject`))))
	got = until(hold.ID, "failure", status(ledger.Failed))
	require.NotNil(t, got.Failure)
	require.Equal(t, 1, got.Failure.Item)
	require.Contains(t, got.Failure.Message, "rejected by alice via dashboard: not on a Friday")
	as = approvalsOf(t, e, hold.ID)
	require.Equal(t, ledger.ApprovalRejected, as[0].State)
	require.Equal(t, "alice via dashboard", as[0].DecidedBy)
	b.poll("the rejection shown", `document.getElementById('status').textContent === "failed" && document.querySelector('#approvals tr.a-rejected[data-approval="1"]') !== null`)

	// 6. Pause a running task whose unit is held at the gate: the pause is
	// recorded at once and returns once the unit in flight committed.
	gated := submit("gated", `task "gated" {`+g.Step("each", "gate.wasm", 2, 1)+`}`)
	select {
	case <-g.Arrived():
	case <-ctx.Done():
		t.Fatal("the gated task never ran")
	}
	require.Equal(t, "/tasks/"+gated.ID, b.navigate("open gated", chromedp.Navigate(base+"/tasks/"+gated.ID)))
	b.poll("running, with the pause button", `document.getElementById('status').textContent === "running" && document.getElementById('pause') !== null`)
	released := make(chan struct{})
	go func() { // the unit in flight may finish once the pause is recorded
		defer close(released)
		until(gated.ID, "pause", status(ledger.Paused))
		g.Release(1)
	}()
	require.Equal(t, "/tasks/"+gated.ID, b.navigate("pause",
		chromedp.SendKeys(chromedp.CSS(`#actions input[name="reason"]`), "maintenance window"),
		chromedp.Click(chromedp.ID("pause"))))
	<-released
	got, err = e.Task(ctx, gated.ID)
	require.NoError(t, err)
	require.Equal(t, ledger.Paused, got.Status)
	require.Equal(t, ledger.PauseOperator, got.Pause.Kind)
	require.Equal(t, "alice via dashboard", got.Pause.By)
	require.Equal(t, "maintenance window", got.Pause.Note)
	require.Equal(t, 1, got.Steps[0].Done, "the unit in flight committed")
	b.poll("paused, with its reason and Resume", `document.getElementById('status').textContent === "paused" && document.getElementById('reason').textContent === "paused by alice via dashboard: maintenance window" && document.getElementById('resume') !== null && document.getElementById('pause') === null`)
	require.Equal(t, "/tasks/"+gated.ID, b.navigate("resume", chromedp.Click(chromedp.ID("resume"))))
	g.Open()
	until(gated.ID, "success", status(ledger.Succeeded))

	// 7. A budget reached: the task pauses; its page says which budget,
	// the command that raises it, and raises it and resumes with a button.
	capped := submit("capped", controlTask("capped", 3, false, "budget {\n    units = 2\n  }"))
	until(capped.ID, "budget pause", status(ledger.Paused))
	require.Equal(t, "/tasks/"+capped.ID, b.navigate("open capped", chromedp.Navigate(base+"/tasks/"+capped.ID)))
	b.poll("the raise hint", `document.getElementById('raise-command') !== null`)
	require.Equal(t, "lhengine resume "+capped.ID+" --budget units=+2", b.eval(`document.getElementById('raise-command').textContent`))
	require.Contains(t, b.eval(`document.getElementById('raise-hint').textContent`), "Budget units paused the task")
	require.Equal(t, "budget units reached: 2 of 2", b.eval(`document.getElementById('reason').textContent`))
	require.Equal(t, "true", b.eval(`String(document.querySelector('#budgets tr[data-budget="units"]').classList.contains('b-reached'))`))
	require.Equal(t, "units=+2", b.eval(`document.querySelector('#actions input[name="budget"]').value`))
	require.Equal(t, "/tasks/"+capped.ID, b.navigate("raise and resume", chromedp.Click(chromedp.ID("resume"))))
	got = until(capped.ID, "success", status(ledger.Succeeded))
	require.Equal(t, int64(4), got.Budget.Limits.Units)
	evs := eventsOf(t, e, capped.ID)
	raised := 0
	for _, ev := range evs {
		if ev.Type == ledger.EvBudgetRaised {
			raised++
			require.Equal(t, "alice via dashboard", ev.Owner)
		}
	}
	require.Equal(t, 1, raised)
	b.poll("the budget under its limit", `document.getElementById('status').textContent === "succeeded" && document.querySelector('#budgets tr[data-budget="units"] .pct').textContent === "75%"`)
	require.False(t, strings.Contains(b.eval(`document.body.innerText`), "raise it and resume"), "no raise hint once it runs")
}

func eventsOf(t *testing.T, e *engine.Engine, id string) []ledger.Event {
	t.Helper()
	var out []ledger.Event
	require.NoError(t, e.Read(func(r ledger.Reader) error {
		var err error
		out, err = r.Events(id, 0, 0)
		return err
	}))
	return out
}
