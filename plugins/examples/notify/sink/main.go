// Command sink is a mail sink for the notify example: an HTTP server on
// loopback that accepts POSTed messages, applies each Idempotency-Key once,
// and answers GET /applied?key=K with 200 (applied) or 404.
//
//	go run ./plugins/examples/notify/sink -addr 127.0.0.1:8025
//
// GET /stats prints how many requests arrived and how many were applied.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/lhengine/lhengine/plugins/examples/notify/sink/mailsink"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8025", "listen address (loopback)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: *addr, Handler: mailsink.New()}
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	fmt.Fprintf(os.Stderr, "mail sink on http://%s/mail\n", *addr)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
