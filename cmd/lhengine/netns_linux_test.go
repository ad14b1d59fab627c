package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/engine"
	"github.com/lhengine/lhengine/internal/testpg"
	"github.com/lhengine/lhengine/internal/testwasm"
	"github.com/lhengine/lhengine/ledger"
)

// testHost is a network namespace joined to this one by a veth pair: a
// host whose only way to the database is that link.
type testHost struct {
	ns, link   string // the namespace, and the link's end on this side
	addr, peer string // this side's address, and the host's
}

// ipRun runs ip with args.
func ipRun(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
}

// testHosts makes n test hosts, removed when the test ends. They need
// root (network namespaces and links).
func testHosts(t *testing.T, n int) []testHost {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	net := 20 + os.Getpid()%200
	hosts := make([]testHost, n)
	for i := range hosts {
		h := testHost{ns: fmt.Sprintf("lh%dn%d", os.Getpid(), i), link: fmt.Sprintf("lh%dh%d", os.Getpid()%100000, i),
			addr: fmt.Sprintf("10.%d.%d.1", net, i+1), peer: fmt.Sprintf("10.%d.%d.2", net, i+1)}
		ipRun(t, "netns", "add", h.ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", h.ns).Run() })
		peer := fmt.Sprintf("lh%dp%d", os.Getpid()%100000, i)
		ipRun(t, "link", "add", h.link, "type", "veth", "peer", "name", peer)
		t.Cleanup(func() { _ = exec.Command("ip", "link", "del", h.link).Run() })
		ipRun(t, "link", "set", peer, "netns", h.ns)
		ipRun(t, "addr", "add", h.addr+"/24", "dev", h.link)
		ipRun(t, "link", "set", h.link, "up")
		ipRun(t, "netns", "exec", h.ns, "ip", "addr", "add", h.peer+"/24", "dev", peer)
		ipRun(t, "netns", "exec", h.ns, "ip", "link", "set", peer, "up")
		ipRun(t, "netns", "exec", h.ns, "ip", "link", "set", "lo", "up")
		hosts[i] = h
	}
	return hosts
}

// TestPostgresWorkerCutOffFromTheDatabase: three worker processes, each in
// a network namespace of its own that reaches PostgreSQL by one veth link
// only, work a 3,000-item fan-out. The link of the one that committed the
// most goes down mid-task: the other two take its units over and finish
// the task, every unit committed exactly once; when the link comes back,
// every unit the others took back from the cut-off worker kept the commit
// of a newer lease (its own late commit refused), and the worker stops
// cleanly. The task's notify block reaches a receiver on this side of the
// links: every event it names arrives, each under its own
// Idempotency-Key (a receiver that dedupes by the key sees each once).
func TestPostgresWorkerCutOffFromTheDatabase(t *testing.T) {
	t.Parallel()
	const items = 3000
	hosts := testHosts(t, 3)
	o := testpg.Options{}
	for _, h := range hosts {
		o.Listen = append(o.Listen, h.addr)
		o.Trust = append(o.Trust, h.peer+"/32")
	}
	cluster := pgCluster(t, o)
	url := cluster.URL("postgres")
	bin := buildBinary(t)
	rv := notifyReceiver(t, hosts)
	task := strings.Replace(pgFanOut(items), `task "crashy" {`, `task "crashy" {
  notify {
    url    = "`+rv.url+`"
    events = ["started", "step_done", "succeeded"]
  }`, 1)
	dir := testwasm.TaskDir(t, testwasm.CGuest(t, "pipeline"), task)
	homes := t.TempDir()
	lh := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"--store", url, "--home", filepath.Join(homes, "client")}, args...)...).CombinedOutput()
		require.NoError(t, err, "lhengine %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	lh("store", "migrate")
	id := lh("submit", filepath.Join(dir, "task.hcl"))

	workers := make([]*pgWorker, len(hosts))
	for i, h := range hosts {
		workers[i] = startWorker(t, "ip", "netns", "exec", h.ns, bin, "--store", cluster.URLAt(h.addr, "postgres"),
			"--home", filepath.Join(homes, fmt.Sprint("host", i)), "--log-level", "warn",
			"worker", "--concurrency", "4", "--name", fmt.Sprint("host", i))
	}

	e, err := engine.Open(context.Background(), engine.Config{Home: filepath.Join(homes, "reader"), Store: url})
	require.NoError(t, err)
	defer e.Close(context.Background())
	type held struct {
		owner string
		epoch uint64
	}
	// state reads how many units are done, by whom, and which each holds.
	state := func() (done int, by map[string]int, leased map[int]held, st ledger.Status) {
		by, leased = map[string]int{}, map[int]held{}
		_ = e.Read(func(r ledger.Reader) error {
			task, err := r.Task(id)
			if err != nil {
				return err
			}
			st = task.Status
			units, err := r.Units(id, 1)
			if err != nil {
				return err
			}
			for _, u := range units {
				switch u.State {
				case ledger.UnitDone:
					done++
					a, err := r.Attempt(id, 1, u.Item, u.Committed)
					if err != nil {
						return err
					}
					by[strings.SplitN(a.Owner, "/", 2)[1]]++
				case ledger.UnitLeased:
					leased[u.Item] = held{u.Owner, u.Epoch}
				}
			}
			return nil
		})
		return done, by, leased, st
	}
	waitFor := func(what string, ok func(done int, st ledger.Status) bool) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(5 * time.Minute)
		for {
			if done, _, _, st := state(); ok(done, st) {
				return
			}
			select {
			case <-tick.C:
			case <-deadline:
				done, by, _, st := state()
				t.Fatalf("waiting for %s: %d units done %v, task %s\n%s\n%s\n%s", what, done, by, st,
					workers[0].stderr.String(), workers[1].stderr.String(), workers[2].stderr.String())
			}
		}
	}

	waitFor("a tenth of the units", func(done int, _ ledger.Status) bool { return done >= items/10 })
	db, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer db.Close(context.Background())
	holding := func(leased map[int]held, name string) map[int]held {
		out := map[int]held{}
		for item, h := range leased {
			if strings.HasSuffix(h.owner, "/"+name) {
				out[item] = h
			}
		}
		return out
	}
	// The busiest worker that holds units is cut off. What it sent before
	// the cut may still be running in the database (a commit waiting for a
	// lock): it lands, and is no takeover. Nothing it sends after can:
	// once none of its sessions is at work, what it holds is what the
	// others must take over. A cut that finds it holding nothing by then
	// (its last commits landed and claimed nothing yet) is undone and made
	// again.
	var (
		victim int
		name   string
		cutAt  int
		atCut  map[int]held
	)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for try := 0; len(atCut) == 0; try++ {
		require.Less(t, try, 50, "no cut caught a worker holding units")
		if try > 0 {
			<-tick.C
		}
		_, by, leased, _ := state()
		victim = -1
		for i := range hosts {
			if n := fmt.Sprint("host", i); len(holding(leased, n)) > 0 && (victim < 0 || by[n] > by[name]) {
				victim, name = i, n
			}
		}
		if victim < 0 {
			continue
		}
		ipRun(t, "link", "set", hosts[victim].link, "down")
		for at := time.Now(); ; <-tick.C {
			var working int
			require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE client_addr = $1::inet AND state = 'active'`, hosts[victim].peer).Scan(&working))
			if working == 0 {
				break
			}
			require.Less(t, time.Since(at), 2*time.Minute, "the cut-off worker's sessions still at work")
		}
		var leasedNow map[int]held
		cutAt, _, leasedNow, _ = state()
		if atCut = holding(leasedNow, name); len(atCut) == 0 {
			ipRun(t, "link", "set", hosts[victim].link, "up")
		}
	}

	waitFor("the others to finish the task", func(_ int, st ledger.Status) bool { return st.Terminal() })
	// Every event the notify block names reached the receiver, each under
	// the Idempotency-Key of its event, whoever sent it.
	want := map[string]bool{}
	require.NoError(t, e.Read(func(r ledger.Reader) error {
		return r.EachEvent(id, 0, func(ev *ledger.Event) bool {
			switch ev.Type {
			case ledger.EvStarted, ledger.EvStepDone, ledger.EvSucceeded:
				want[fmt.Sprintf("%s/notify/%d", id, ev.Seq)] = true
			}
			return true
		})
	}))
	require.Len(t, want, 1+3+1, "started, three steps done, succeeded")
	keys, posts := rv.wait(t, len(want))
	require.Equal(t, want, keys, "each event notified, under its own key")
	ipRun(t, "link", "set", hosts[victim].link, "up")
	for _, w := range workers {
		require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	}
	for i, w := range workers {
		require.NoError(t, w.cmd.Wait(), "worker %d: %s", i, w.stderr.String())
	}

	done, by, _, _ := state()
	require.Equal(t, items, done)
	require.NoError(t, e.Read(func(r ledger.Reader) error {
		succeededTask(t, r, id)
		require.Len(t, committedOnce(t, r, id, 1), items)
		// A lease the others took back is named by a lease_expired event
		// (owner and epoch). The cut-off worker may still have committed
		// a unit whose commit was on its way when the link went down,
		// before any takeover: that commit stands. For every unit taken
		// over, the commit kept is of a newer lease: what the cut-off
		// worker sent after is refused.
		takenOver := map[int]bool{}
		require.NoError(t, r.EachEvent(id, 0, func(ev *ledger.Event) bool {
			if ev.Type == ledger.EvLeaseExpired && ev.Item != nil {
				if h, ok := atCut[*ev.Item]; ok && h.owner == ev.Owner && h.epoch == ev.Epoch {
					takenOver[*ev.Item] = true
				}
			}
			return true
		}))
		require.NotEmpty(t, takenOver, "the others took over units the cut-off worker held")
		for item := range takenOver {
			units, err := r.UnitsUpTo(id, 1, item+1)
			require.NoError(t, err)
			u := units[item]
			a, err := r.Attempt(id, 1, item, u.Committed)
			require.NoError(t, err)
			require.Greater(t, a.Epoch, atCut[item].epoch, "item %d: the commit kept is of a lease newer than the cut-off worker's", item)
			require.NotEqual(t, atCut[item].owner, a.Owner, "item %d", item)
		}
		return nil
	}))
	t.Logf("units committed by worker: %v; %s cut off at %d units holding %d; %d notifications received for %d events",
		by, name, cutAt, len(atCut), posts, len(want))
}

// receiver takes a task's notifications on every test host: each
// Idempotency-Key it was sent, and how many POSTs came.
type receiver struct {
	url   string
	mu    sync.Mutex
	keys  map[string]bool
	posts int
	got   chan struct{} // a token per POST
}

// notifyReceiver starts a receiver listening on this side's address of
// every host, on one port, and names it lhreceiver on each host (the
// hosts file ip netns exec puts in place for the namespace): a task's
// notify URL reaches it from any of them.
func notifyReceiver(t *testing.T, hosts []testHost) *receiver {
	t.Helper()
	rv := &receiver{keys: map[string]bool{}, got: make(chan struct{}, 1<<16)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rv.mu.Lock()
		rv.keys[r.Header.Get("Idempotency-Key")] = true
		rv.posts++
		rv.mu.Unlock()
		rv.got <- struct{}{}
	})}
	port := "0"
	for _, h := range hosts {
		l, err := net.Listen("tcp", net.JoinHostPort(h.addr, port))
		require.NoError(t, err)
		_, port, _ = net.SplitHostPort(l.Addr().String())
		go func() { _ = srv.Serve(l) }()
		etc := filepath.Join("/etc/netns", h.ns)
		require.NoError(t, os.MkdirAll(etc, 0o755))
		t.Cleanup(func() { _ = os.RemoveAll(etc) })
		require.NoError(t, os.WriteFile(filepath.Join(etc, "hosts"), []byte("127.0.0.1 localhost\n"+h.addr+" lhreceiver\n"), 0o644))
	}
	t.Cleanup(func() { _ = srv.Close() })
	rv.url = "http://lhreceiver:" + port + "/hook"
	return rv
}

// wait waits until the receiver holds n keys, and returns them and the
// number of POSTs.
func (rv *receiver) wait(t *testing.T, n int) (map[string]bool, int) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		rv.mu.Lock()
		if len(rv.keys) >= n {
			defer rv.mu.Unlock()
			return maps.Clone(rv.keys), rv.posts
		}
		have := len(rv.keys)
		rv.mu.Unlock()
		select {
		case <-rv.got:
		case <-deadline:
			t.Fatalf("the receiver got %d notifications of the %d events", have, n)
		}
	}
}
