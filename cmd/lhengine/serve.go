package main

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/cmd/lhengine/internal/home"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/server"
)

func (a *app) serveCmd() *cobra.Command {
	var (
		listen string
		o      engine.WorkOptions
		mf     recordFlag
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Own the home: workers, the HTTP API and the web dashboard in one long-lived process",
		Long: `serve owns the home until it is stopped: its workers run every task submitted
to the home, and it serves the API (specs/api.md) on the home's Unix socket,
where every other lhengine command finds it, and with --listen on TCP: the API
under /v1/ and the web dashboard at /.

The TCP listener requires a bearer token. The home's own token is created on
the first start (HOME/run/token, readable by its owner only); "lhengine token
add NAME" gives a person a token of their own. Clients pass one with
--token-file FILE or the LHENGINE_TOKEN environment variable, and a browser
logs in with it once, or with the login link serve prints at start
(http://ADDR/login?once=...: it works once, within 15 minutes, and is kept in
this process's memory only). What a request decides, pauses, raises or
retries is recorded as made by its token's name ("owner" for the home's
token), not by what the client says. Tokens are read again for every request: one added or
removed counts at once, without a restart. The default address is loopback
only.

SIGTERM or Ctrl-C stops it gracefully: no more units are claimed, the units in
flight get --grace to finish and commit, and those still running then are
given back without charging their attempt (ready at once for the next owner
of the home; committed units never run again). The API answers until the
units are done; then the listeners close, event streams end, and requests in
flight get the same grace. A second SIGTERM or Ctrl-C stops at once. stderr
says how many units finished and how many were given back; the exit status
is 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			a.dashboard = true
			var tokenFile, once string
			logins := server.NewOnceLogins(server.OnceLoginFor, nil)
			if listen != "" {
				l, err := net.Listen("tcp", listen)
				if err != nil {
					return fmt.Errorf("--listen %s: %w", listen, err)
				}
				defer l.Close()
				a.extra = append(a.extra, home.Listener{L: l, Handler: func(srv *server.Server) http.Handler {
					if _, err := homefiles.Token(a.home); err != nil {
						// No token, no TCP: refuse everything rather than serve open.
						a.logger().Error("no API token; the TCP listener refuses every request", "error", err)
						return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
							http.Error(w, "the server has no API token: "+err.Error(), http.StatusServiceUnavailable)
						})
					}
					// Read again for every request: a token added or
					// removed with "lhengine token" counts at once.
					tokens := func() (map[string]string, error) { return homefiles.Tokens(a.home) }
					return logins.Handler(server.RequireTokens(srv.Handler(), tokens), tokens)
				}})
				tokenFile = api.TokenPath(a.home)
				listen = l.Addr().String()
				// A one-time login link for the person at this terminal,
				// held in this process's memory only.
				if once, err = logins.Issue(homefiles.OwnerToken); err != nil {
					return err
				}
			}
			return a.withOwner(ctx, func(s *home.Session) error {
				if err := mf.apply(&o, true); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "serving home %s\n  socket:    %s\n", a.home, api.SocketPath(a.home))
				if listen != "" {
					fmt.Fprintf(a.stdout, "  dashboard: http://%s/\n  login:     http://%s/login?once=%s (works once, for 15 minutes)\n  API:       http://%s/v1/ (bearer token in %s)\n",
						listen, listen, once, listen, tokenFile)
				}
				return a.work(ctx, s, o, a.stderr)
			})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7777", `also serve the API and the dashboard on this TCP address ("" = the home's socket only)`)
	cmd.Flags().IntVar(&o.Concurrency, "concurrency", defaultConcurrency, "attempts run at once (at least 1)")
	cmd.Flags().DurationVar(&o.LeaseFor, "lease", 30*time.Second, "lease length, at least 1s; renewed at a third of it while a step runs")
	cmd.Flags().DurationVar(&o.PollEvery, "poll", time.Second, "longest wait of an idle worker before it looks for new work; positive")
	a.registerGrace(cmd)
	mf.register(cmd)
	return cmd
}
