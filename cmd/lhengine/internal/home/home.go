package home

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/homefiles"
	"github.com/lhengine/lhengine/ledger"
	"github.com/lhengine/lhengine/server"
)

// Config is how a command reaches a home.
type Config struct {
	Dir       string // the home
	Server    string // --server: an owner's API over TCP instead of the home
	TokenFile string // --token-file, for Server
	Logger    hclog.Logger
	// Engine is the engine's configuration should this process own the
	// home; Connect sets its Home, Logger and MustExist.
	Engine engine.Config
	// Dashboard, Halt and Extra are the server's should this process own
	// the home: the web dashboard (serve), the end of every grace (a
	// second signal), and more listeners (serve --listen).
	Dashboard bool
	Halt      <-chan struct{}
	Extra     []Listener
	// BeforeClose, if set, runs when this process owns the home, once
	// its work and its API have stopped and before the engine closes.
	BeforeClose func()
	// Grace is how long the API's requests in flight may run on as this
	// process stops serving (--grace); each listener has a floor of its
	// own.
	Grace time.Duration
}

// Listener is one more listener the owner serves (serve --listen), with
// the handler it wants from the server.
type Listener struct {
	L       net.Listener
	Handler func(*server.Server) http.Handler
}

// Mode says what a command needs of a home.
type Mode struct {
	Create bool   // create the home if it has no store (submit, run, serve...)
	Works  string // what this process's workers will run if it owns the home: "all", "task", ""
	// Own: the command works tasks itself; a home already owned is
	// returned as a client session all the same, and the command decides.
	Own bool
}

// Session is a command's way into a home.
type Session struct {
	Client *api.Client
	// Owned by this process: its engine and server. Nil for a client of
	// another owner.
	Engine *engine.Engine
	Server *server.Server
	// Owner is the other process that owns the home (nil when this one
	// does); Self is this process as owner (when it does).
	Owner *api.Owner
	Self  api.Owner
	stop  func() error
}

// Local says this process owns the home.
func (s *Session) Local() bool { return s.Engine != nil }

// Close stops serving and closes the engine (if owned) or the client.
func (s *Session) Close() error {
	s.Client.Close()
	if s.stop != nil {
		return s.stop()
	}
	return nil
}

// OwnWait bounds how long a command waits for a home held by another
// process that is not serving (one that is starting, or a command that
// holds it for a moment) before giving up. The wait starts again each time
// the home changes hands (commands started at once take it in turn), up
// to ownWaitAll in all. It also bounds how long a request is asked again
// of the next owner when the one it was sent to went away (WithAgain).
const (
	OwnWait    = 10 * time.Second
	ownWaitAll = time.Minute
)

// Connect returns a session of the home: the owner's socket if one
// answers, else this process opens the store and owns the home.
func Connect(ctx context.Context, c Config, m Mode) (*Session, error) {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Server != "" {
		return dialServer(ctx, c)
	}
	if err := Private(c.Dir, m.Create, c.Logger); err != nil {
		return nil, err
	}
	if !m.Own {
		if s := DialOwner(ctx, c.Dir); s != nil {
			return s, nil
		}
	}
	start := time.Now()
	deadline := start.Add(OwnWait)
	holder := "" // the owner session on record when the wait last started
	if o, err := homefiles.ReadOwner(c.Dir); err == nil {
		holder = o.Session
	}
	for {
		ec := c.Engine
		ec.Home, ec.Logger, ec.MustExist = c.Dir, c.Logger, !m.Create
		e, err := engine.Open(ctx, ec)
		if err == nil {
			return serveLocal(ctx, c, e, m)
		}
		if !errors.Is(err, ledger.ErrInUse) {
			return nil, err
		}
		// Another process has the store: talk to it, or wait for it to
		// start serving or to let go. A command that works tasks waits
		// for one that only holds the home for a moment (status, or
		// events --follow looking at it) to let go.
		if s := DialOwner(ctx, c.Dir); s != nil {
			if !m.Own || s.Owner.Works != "" {
				return s, nil
			}
			s.Client.Close()
		}
		if o, err := homefiles.ReadOwner(c.Dir); err == nil && o.Session != holder {
			holder = o.Session
			deadline = time.Now().Add(OwnWait)
			if all := start.Add(ownWaitAll); deadline.After(all) {
				deadline = all
			}
		}
		if time.Now().After(deadline) || stuckOwner(c.Dir) {
			return nil, Busy(c.Dir, err)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// DialOwner returns a client session of the owner of home dir, or nil if
// no owner answers on the socket (there is none, or it died and left its
// socket behind: the next owner replaces it).
func DialOwner(ctx context.Context, dir string) *Session {
	path := api.SocketPath(dir)
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	c := api.NewSocketClient(path)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	o, err := c.Owner(cctx)
	// The probe's connection is not kept: an owner that lets go closes
	// its idle connections, and a request sent on one as it does is cut
	// after it was sent, while a new connection is served or refused.
	c.Close()
	if err != nil {
		return nil
	}
	return &Session{Client: c, Owner: o}
}

// dialServer returns a client session of the server --server names.
func dialServer(ctx context.Context, c Config) (*Session, error) {
	tok := os.Getenv(api.TokenEnv)
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	cl := api.NewClient(c.Server, nil, tok)
	o, err := cl.Owner(ctx)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("server %s: %w", c.Server, err)
	}
	return &Session{Client: cl, Owner: o}, nil
}

// stuckOwner: the home's owner record names a live process that works
// tasks and started a while ago, yet its socket did not answer. Waiting
// for it to let go would be waiting for a worker to finish: say so at once.
func stuckOwner(dir string) bool {
	o, err := homefiles.ReadOwner(dir)
	return err == nil && o.Stopped.IsZero() && o.Works != "" &&
		time.Since(o.Started) > 2*time.Second && alive(o.PID)
}

// Busy explains a home held by a process that does not answer, the
// store refusing to open with cause.
func Busy(dir string, cause error) error {
	o, err := homefiles.ReadOwner(dir)
	if err != nil {
		return fmt.Errorf("home %s is in use by another process that does not serve its API (it may be an older lhengine): "+
			"wait for it to finish or stop it, then try again (%v)", dir, cause)
	}
	if fate := Fate(o, o); fate != "" {
		// The record is a past owner's: whoever holds the home now has
		// not written one.
		return fmt.Errorf("home %s is in use by a process that does not answer on %s and has not recorded itself as the owner "+
			"(the last owner on record, %s, %s): it may be a command starting, or a program other than lhengine; try again in a moment (%v)",
			dir, api.SocketPath(dir), o, fate, cause)
	}
	return fmt.Errorf("home %s is in use by %s, which does not answer on %s: "+
		"wait for it to finish, or stop it (kill %d) and try again", dir, o, api.SocketPath(dir), o.PID)
}

// serveLocal makes this process the home's owner: it serves the API on
// the home's socket for other processes and on an in-process listener
// for this command's own client.
func serveLocal(ctx context.Context, c Config, e *engine.Engine, m Mode) (*Session, error) {
	owner := api.Owner{Session: homefiles.NewSession(), PID: os.Getpid(), Command: strings.Join(append([]string{"lhengine"}, os.Args[1:]...), " "),
		Started: time.Now().UTC(), Works: m.Works, Version: engine.Version, Home: c.Dir}
	srv := server.New(e, server.Options{Owner: owner, Logger: c.Logger.Named("api"), Dashboard: c.Dashboard,
		Halt: c.Halt})
	grace := func(least time.Duration) time.Duration { return max(least, c.Grace) }
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	serve := func(l net.Listener, h func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h(); err != nil {
				c.Logger.Warn("API listener stopped", "addr", l.Addr().String(), "error", err)
			}
		}()
	}
	pl := newPipeListener()
	serve(pl, func() error { return srv.Serve(sctx, pl, nil, grace(time.Second)) })
	if err := homefiles.WriteOwner(c.Dir, owner); err != nil {
		c.Logger.Warn("owner record not written", "error", err)
	}
	sock, err := homefiles.Listen(c.Dir)
	if err != nil {
		c.Logger.Warn("the API socket is not served: other commands cannot reach this home while this one runs", "error", err)
	} else {
		serve(sock, func() error { return srv.Serve(sctx, sock, nil, grace(time.Second)) })
	}
	for _, l := range c.Extra {
		serve(l.L, func() error { return srv.Serve(sctx, l.L, l.Handler(srv), grace(5*time.Second)) })
	}
	s := &Session{Client: api.NewDialClient(pl.Dial), Engine: e, Server: srv, Self: owner}
	s.stop = func() error {
		cancel()
		wg.Wait()
		if c.BeforeClose != nil {
			c.BeforeClose()
		}
		err := e.Close(context.WithoutCancel(ctx))
		homefiles.OwnerStopped(c.Dir, owner, time.Now().UTC())
		return err
	}
	return s, nil
}

// With connects as m says, runs fn and closes the session.
func With(ctx context.Context, c Config, m Mode, fn func(*Session) error) error {
	s, err := Connect(ctx, c, m)
	if err != nil {
		return err
	}
	err = fn(s)
	return errors.Join(err, s.Close())
}

// WithAgain is With, with fn run again if the owner goes away under a
// request that did nothing (api.ErrOwnerGone: it stopped or died, or was a
// command that held the home for a moment): with the home's next owner, or
// with the home opened by this process, for up to OwnWait. fn must be fit
// to run again after such a failure.
func WithAgain(ctx context.Context, c Config, m Mode, fn func(*Session) error) error {
	deadline := time.Now().Add(OwnWait)
	for {
		var gone *api.Owner
		err := With(ctx, c, m, func(s *Session) error {
			err := fn(s)
			if !s.Local() && errors.Is(err, api.ErrOwnerGone) {
				gone = s.Owner
			}
			return err
		})
		if gone == nil || c.Server != "" || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("home %s: its owner, %s, went away, and none answered in its place within %s: %w", c.Dir, gone, OwnWait, err)
		}
	}
}

// Fate says what became of owner o, given the home's owner record rec:
// "stopped" (it marked its record stopped), "died" (it is not running and
// did not), or "" (it is running).
func Fate(o, rec *api.Owner) string {
	switch {
	case rec != nil && rec.Session == o.Session && !rec.Stopped.IsZero():
		return "stopped"
	case !alive(o.PID):
		return "died"
	}
	return ""
}

// Gone says what became of owner o of home dir, which stopped serving: it
// "stopped", it "died", or (neither seen within two seconds) it "stopped
// answering". It returns ctx's error if ctx ends first.
func Gone(ctx context.Context, dir string, o *api.Owner) (string, error) {
	// Its record is marked stopped, or its process is gone, a moment
	// after its stream ends: no event says which comes first.
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		rec, _ := homefiles.ReadOwner(dir)
		if f := Fate(o, rec); f != "" {
			return f, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
	}
	return "stopped answering", nil
}

// WaitForOwner returns once home dir has an owner that may work task id:
// one other than last serves the socket, or has owned the home since (its
// owner record says so: it may have come and gone between two looks), or
// the owner serving now works every task or this one (it may have answered
// before its workers started). Or ctx ends. It polls: no portable
// file-watch API reports a socket's bind, and a quarter second is quick
// enough for a person.
func WaitForOwner(ctx context.Context, dir string, last api.Owner, id string) error {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if s := DialOwner(ctx, dir); s != nil {
			s.Client.Close()
			if o := s.Owner; o.Session != last.Session || o.WorksAll() || o.Works == id || o.Works == "task" {
				return nil
			}
		}
		if o, err := homefiles.ReadOwner(dir); err == nil && o.Session != last.Session {
			return nil
		}
	}
}
