package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/telemetry"
	"github.com/lhengine/lhengine/engine"
)

// A home has one owner; package home decides who (see its doc). These are
// the app's ways into it, with the global flags.

// homeConfig is how this command reaches its home: --home, --server,
// --token-file, and what the engine and server need should it own the
// home.
func (a *app) homeConfig() home.Config {
	cache, noCache := a.cacheConfig()
	return home.Config{Dir: a.home, Server: a.server, TokenFile: a.tokenFile, Logger: a.logger(),
		Engine: engine.Config{AllowDamaged: a.damaged, CacheDir: cache, NoCache: noCache, OnCompile: a.onCompile(),
			Store: a.storeURL, MigrateStore: a.migrate,
			TracerProvider: a.tracerProvider()},
		Dashboard: a.dashboard, Halt: a.stop.halted().Done(), Extra: a.extra, Grace: a.stop.grace,
		BeforeClose: a.beforeClose}
}

// connect returns a session of the home (home.Connect).
func (a *app) connect(ctx context.Context, m home.Mode) (*home.Session, error) {
	return home.Connect(ctx, a.homeConfig(), m)
}

// withSession connects as m says, runs fn and closes the session.
func (a *app) withSession(ctx context.Context, m home.Mode, fn func(*home.Session) error) error {
	return home.With(ctx, a.homeConfig(), m, fn)
}

// withSessionAgain is withSession, with fn run again as withClient says
// when the owner goes away under a request that did nothing.
func (a *app) withSessionAgain(ctx context.Context, m home.Mode, fn func(*home.Session) error) error {
	return home.WithAgain(ctx, a.homeConfig(), m, fn)
}

// withClient connects to the home (never creating one), runs fn with a
// client and closes the session. If the owner goes away under a request
// that did nothing, fn runs again with the home's next owner, or with the
// home opened by this process (home.WithAgain): fn must be fit to run
// again after such a failure.
func (a *app) withClient(ctx context.Context, fn func(*api.Client) error) error {
	return a.withSessionAgain(ctx, home.Mode{}, func(s *home.Session) error { return fn(s.Client) })
}

// chooseHome sets a.home from --home, or finds it (home.Find).
func (a *app) chooseHome(cmd *cobra.Command) {
	if cmd.Flags().Changed("home") {
		a.homeWhy = "--home"
		return
	}
	cwd, err := os.Getwd()
	if err != nil {
		cwd = "."
	}
	a.home, a.homeWhy = home.Find(cwd, os.Getenv("LHENGINE_HOME"), home.UserDataDir())
}

func (a *app) homeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "home",
		Short: "Which home this command would use, and why",
		Long: `home prints the home commands use here, and why: --home when given; else the
nearest folder named .lhengine in the current folder or a parent (as git
finds its repository); else $LHENGINE_HOME; else the per-user default,
lhengine in the user's data directory ($XDG_DATA_HOME, or ~/.local/share).
It also says whether a store is there yet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			abs, err := filepath.Abs(a.home)
			if err != nil {
				abs = a.home
			}
			_, err = os.Stat(filepath.Join(abs, "store"))
			exists := err == nil
			if a.json() {
				return a.printJSON(struct {
					Home   string `json:"home"`
					Why    string `json:"why"`
					Exists bool   `json:"exists"`
				}{abs, a.homeWhy, exists})
			}
			state := "holds a store"
			if !exists {
				state = "no store yet: the first run or submit creates it"
			}
			fmt.Fprintf(a.stdout, "%s\n  chosen: %s\n  %s\n", abs, a.homeWhy, state)
			return nil
		},
	}
}

// tracerProvider is the tracer provider of the OTEL_* environment
// (telemetry.TracerProvider, specs/metrics.md "Traces"), made once; nil
// when no endpoint is configured. A provider that cannot be made is
// warned of, and the command runs untraced.
func (a *app) tracerProvider() trace.TracerProvider {
	if !a.tracesSet {
		a.tracesSet = true
		var err error
		a.traces, a.endTraces, err = telemetry.TracerProvider(context.Background(), engine.Version)
		if err != nil {
			fmt.Fprintln(a.stderr, "warning: traces are off:", err)
			a.traces, a.endTraces = nil, nil
		}
	}
	return a.traces
}

// sharedStore reports whether the ledger is a store that many processes
// share (--store postgres://…): its tasks' workers may be in other homes.
func (a *app) sharedStore() bool { return a.storeURL != "" }
