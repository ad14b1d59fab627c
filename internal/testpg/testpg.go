// Package testpg starts a throwaway PostgreSQL cluster for tests: initdb
// in a temporary folder, pg_ctl start on a loopback port, one database per
// test. It never reaches a shared or external server.
//
// The cluster is started by the first test that asks for one and stopped
// by Main once the package's tests are over; every test gets a database of
// its own (DB), dropped when the test ends.
//
// Without PostgreSQL's programs (Debian's postgresql: scripts/deps.sh
// installs it) a test fails when CI is set, and is skipped otherwise.
package testpg

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a running throwaway cluster.
type Cluster struct {
	Dir    string // its data folder and log
	Port   int    // on 127.0.0.1
	bin    string
	uid    int // the user it runs as (-1: this process's), when the tests run as root
	gid    int
	listen string // listen_addresses
}

var (
	once    sync.Once
	shared  *Cluster
	started error
	dbs     atomic.Int64
)

// Main runs the package's tests and then stops the shared cluster, if one
// was started: call it from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testpg:", err)
		}
	}
	return code
}

// Shared returns the package's cluster, starting it on first use.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() { shared, started = Start() })
	if started != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL: %v", started)
		}
		t.Skipf("PostgreSQL: %v", started)
	}
	return shared
}

// DB creates an empty database on the shared cluster for the test and
// returns its URL; the database is dropped when the test ends.
func DB(t testing.TB) string {
	t.Helper()
	c := Shared(t)
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbs.Add(1))
	if err := c.CreateDB(name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	return c.URL(name)
}

// CreateDB creates an empty database name.
func (c *Cluster) CreateDB(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.exec(ctx, "CREATE DATABASE "+name)
}

// URL is the connection URL of database name.
func (c *Cluster) URL(name string) string { return c.URLAt("127.0.0.1", name) }

// URLAt is URL through another of the cluster's addresses (Options.Listen).
func (c *Cluster) URLAt(addr, name string) string {
	return fmt.Sprintf("postgres://postgres@%s:%d/%s?sslmode=disable", addr, c.Port, name)
}

func (c *Cluster) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// Bin finds PostgreSQL's programs: Debian keeps them in
// /usr/lib/postgresql/VERSION/bin, newest first, else PATH.
func Bin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", fmt.Errorf("initdb not found (install Debian's postgresql: scripts/deps.sh)")
	}
	return filepath.Dir(p), nil
}

// Options widen a cluster's reach beyond 127.0.0.1: the test hosts of a
// test (network namespaces) that must reach it.
type Options struct {
	Listen []string // more addresses to listen on (they must exist)
	Trust  []string // more client networks (CIDR) let in without a password
}

// Start initialises and starts a cluster in a new temporary folder. As
// root, it runs PostgreSQL as the postgres user (initdb refuses root).
func Start() (*Cluster, error) { return StartWith(Options{}) }

// StartWith is Start with o.
func StartWith(o Options) (*Cluster, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lhengine-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, bin: bin, uid: -1}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and there is no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.uid, c.gid = uid, gid
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := c.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if len(o.Trust) > 0 {
		hba := filepath.Join(data, "pg_hba.conf")
		f, err := os.OpenFile(hba, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		for _, n := range o.Trust {
			fmt.Fprintf(f, "host all all %s trust\n", n)
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	}
	c.listen = strings.Join(append([]string{"127.0.0.1"}, o.Listen...), ",")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=%s -c max_connections=200", c.Port, dir, c.listen)
	if out, err := c.run("pg_ctl", "start", "-w", "-t", "120", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return nil, fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return c, nil
}

// Stop stops the cluster (fast shutdown) and deletes its folder.
func (c *Cluster) Stop() error {
	out, err := c.run("pg_ctl", "stop", "-w", "-m", "fast", "-D", filepath.Join(c.Dir, "data"))
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return os.RemoveAll(c.Dir)
}

// Restart stops the cluster immediately (as a crash would: no checkpoint)
// and starts it again on the same port.
func (c *Cluster) Restart() error {
	data := filepath.Join(c.Dir, "data")
	if out, err := c.run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", data); err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=%s -c max_connections=200", c.Port, c.Dir, c.listen)
	if out, err := c.run("pg_ctl", "start", "-w", "-t", "120", "-D", data, "-l", filepath.Join(c.Dir, "log"), "-o", opts); err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	return nil
}

func (c *Cluster) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, prog), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = c.Dir
	if c.uid >= 0 {
		runAs(cmd, c.uid, c.gid)
	}
	err := cmd.Run()
	return out.Bytes(), err
}
