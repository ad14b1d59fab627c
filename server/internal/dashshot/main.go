// Command dashshot redraws the picture of the dashboard in the README,
// docs/dashboard.png: the site-audit example (plugins/examples/site-audit)
// runs on a generated site of -pages pages until it waits for a person's
// approval, and a headless Chromium, logged in with a one-time login link,
// takes the task's page. From the module root:
//
//	go run ./server/internal/dashshot -o docs/dashboard.png
//
// It builds the example's plugins (GOOS=wasip1 GOARCH=wasm go build) and
// needs Debian's chromium (scripts/deps.sh installs both toolchains). It is
// run by hand when the dashboard changes, never by the tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/plugins/examples/site-audit/site/sitegen"
	"github.com/lhengine/lhengine/server"
)

func main() {
	out := flag.String("o", "docs/dashboard.png", "the PNG to write")
	pages := flag.Int("pages", 300, "pages of the generated site")
	chrome := flag.String("chromium", "/usr/bin/chromium", "the browser")
	width := flag.Int("width", 1360, "width of the window, in CSS pixels")
	height := flag.Int("height", 1900, "height of the picture, in CSS pixels")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, *out, *pages, *chrome, *width, *height)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashshot:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, pages int, chrome string, width, height int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "dashshot")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// The example: its plugins and task file, side by side.
	example := filepath.Join(root, "plugins", "examples", "site-audit")
	for _, p := range []string{"sitemap", "check", "suggest", "report"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, p+".wasm"), "./plugins/examples/site-audit/"+p)
		cmd.Dir, cmd.Env, cmd.Stderr = root, append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm"), os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building plugin %s: %w", p, err)
		}
	}
	src, err := os.ReadFile(filepath.Join(example, "task.hcl"))
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "task.hcl")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		return err
	}

	// The site, on loopback.
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	site := &http.Server{Handler: sitegen.Generate(pages, 1), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = site.Serve(sl) }()
	defer site.Close()

	// The task, until it waits for the approval of the title rewrites.
	e, err := engine.Open(ctx, engine.Config{Home: filepath.Join(dir, "home")})
	if err != nil {
		return err
	}
	defer e.Close(context.WithoutCancel(ctx))
	task, _, err := e.Submit(ctx, file, engine.SubmitOptions{Vars: map[string]string{"site": "http://" + sl.Addr().String()}})
	if err != nil {
		return err
	}
	if err := e.Work(ctx, engine.WorkOptions{Task: task.ID, ExitWhenIdle: true, Concurrency: 8, PollEvery: 10 * time.Millisecond}); err != nil {
		return err
	}
	if task, err = e.Task(ctx, task.ID); err != nil {
		return err
	}
	if task.Status != ledger.WaitingApproval {
		return fmt.Errorf("the task is %s (%s), not waiting for its approval", task.Status, task.Reason)
	}
	fmt.Fprintf(os.Stderr, "dashshot: task %s waits for its approval\n", task.ID)

	// The dashboard, behind a token, and a one-time link into it.
	token, err := homefiles.Token(filepath.Join(dir, "home"))
	if err != nil {
		return err
	}
	srv := server.New(e, server.Options{Dashboard: true,
		Owner: api.Owner{Home: "~/audits/.lhengine", Works: "all", Command: "lhengine serve"}})
	logins := server.NewOnceLogins(server.OnceLoginFor, nil)
	tokens := func() (map[string]string, error) { return map[string]string{homefiles.OwnerToken: token}, nil }
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(sctx, dl, logins.Handler(server.RequireTokens(srv.Handler(), tokens), tokens), time.Second)
	}()
	defer func() {
		stopServe()
		<-served
	}()
	once, err := logins.Issue(homefiles.OwnerToken)
	if err != nil {
		return err
	}
	base := "http://" + dl.Addr().String()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(width, height), chromedp.Flag("hide-scrollbars", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	b, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(b,
		chromedp.EmulateViewport(int64(width), int64(height)),
		chromedp.Navigate(base+"/login?once="+once),
		chromedp.WaitReady(chromedp.CSS(`body[data-page="list"]`)),
		chromedp.Navigate(base+"/tasks/"+task.ID),
		chromedp.WaitVisible(chromedp.ID("timeline")),
	); err != nil {
		return err
	}
	// The page as a person finds it, its live badge settled.
	if _, err := chromedp.Run(b, chromedp.Poll[chromedp.Void](`document.readyState === "complete"`)); err != nil {
		return err
	}
	png, err := chromedp.Run(b, chromedp.CaptureScreenshot())
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "dashshot: wrote %s (%d KiB)\n", out, len(png)>>10)
	return nil
}

// moduleRoot is the folder of the module's go.mod.
func moduleRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the lhengine module: run it from the module root")
	}
	return filepath.Dir(mod), nil
}
