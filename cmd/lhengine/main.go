// Command lhengine runs durable long-horizon tasks: HCL task files whose steps
// are WebAssembly plugins. See `lhengine --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// governMemory is set by main: only a process of its own sets the runtime's
// limit (tests run many commands in one process).
var governMemory bool

func main() {
	stop, halt, release := stopSignals()
	governMemory = true
	code := runHalt(stop, halt, os.Args[1:], os.Stdout, os.Stderr)
	release()
	os.Exit(code)
}

// stopSignals returns stop, which ends at the first SIGTERM or Ctrl-C
// (SIGINT), and halt, which ends at the second: a command that works tasks
// stops gracefully at the first and at once at the second, like docker
// stop. After the second the signals have their default effect again.
// release stops listening; the goroutine that counts the signals has
// ended when it returns.
func stopSignals() (stop, halt context.Context, release func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	stop, stopNow := context.WithCancel(context.Background())
	halt, haltNow := context.WithCancel(context.Background())
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer signal.Stop(sigs)
		for _, end := range []context.CancelFunc{stopNow, haltNow} {
			select {
			case <-sigs:
				end()
			case <-done:
				return
			}
		}
	}()
	return stop, halt, func() {
		close(done)
		<-exited
		stopNow()
		haltNow()
	}
}
