// Command sink is a mail sink for the notify example: an HTTP server on
// loopback that accepts POSTed messages, applies each Idempotency-Key once,
// and answers GET /applied?key=K with 200 (applied) or 404.
//
//	go run ./plugins/examples/notify/sink -addr 127.0.0.1:0 -addr-file /tmp/sink.addr
//
// With port 0 the system picks a free port. Once it listens, the sink
// prints its address on stderr and, with -addr-file, writes it (host:port)
// to that file, which appears complete or not at all: a script waits for
// the file, not for a fixed port that another program may hold.
//
// GET /stats prints how many requests arrived and how many were applied.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/lhengine/lhengine/plugins/examples/notify/sink/mailsink"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback; port 0 picks a free one)")
	addrFile := flag.String("addr-file", "", "write the address listened on (host:port) to this file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := serve(ctx, *addr, *addrFile)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mail sink:", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, addr, addrFile string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mailsink.New()}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	bound := ln.Addr().String()
	if addrFile != "" {
		if err := writeAtomic(addrFile, bound+"\n"); err != nil {
			ln.Close()
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "mail sink on http://%s/mail\n", bound)
	err = srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-stopped
		return nil
	}
	return err
}

// writeAtomic writes data to path through a temporary file and a rename.
func writeAtomic(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".addr-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
