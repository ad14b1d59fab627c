// Command site serves the site the site-audit example audits: PAGES pages
// generated from a seed with planted problems (package sitegen says which),
// on loopback.
//
//	go run ./plugins/examples/site-audit/site -pages 300 -addr 127.0.0.1:0 -addr-file /tmp/site.addr
//
// -pages defaults to $PAGES, or 3000 without it. With port 0 the system
// picks a free port. Once it listens, the site prints its address on stderr
// and, with -addr-file, writes it (host:port) to that file, which appears
// complete or not at all. GET /planted.json prints the planted counts,
// GET /stats.json what the site was asked.
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
	"strconv"
	"syscall"

	"github.com/lhengine/lhengine/plugins/examples/site-audit/site/sitegen"
)

func main() {
	pages := 3000
	if v := os.Getenv("PAGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "site: PAGES=%q is not a whole number of pages ≥ 1\n", v)
			os.Exit(2)
		}
		pages = n
	}
	flag.IntVar(&pages, "pages", pages, "pages to generate (default $PAGES, or 3000)")
	seed := flag.Uint64("seed", 1, "seed of the generator: the same seed and pages make the same site")
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback; port 0 picks a free one)")
	addrFile := flag.String("addr-file", "", "write the address listened on (host:port) to this file")
	flag.Parse()
	if pages < 1 {
		fmt.Fprintln(os.Stderr, "site: -pages must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := serve(ctx, sitegen.Generate(pages, *seed), *addr, *addrFile)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "site:", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, site *sitegen.Site, addr, addrFile string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: site}
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
	p := site.Planted()
	fmt.Fprintf(os.Stderr, "site of %d pages on http://%s/ (sitemap /sitemap.xml, planted counts /planted.json)\n", p.Pages, bound)
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
