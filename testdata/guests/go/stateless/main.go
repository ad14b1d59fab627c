// Command stateless is the conformance guest (../conformance) declared
// stateless with sdk.Stateless(), so the engine may serve many attempts of
// a task from one instance. It answers the conformance modes exactly as
// that guest does, plus modes that would show state leaking from one
// attempt to the next, and modes that must close the instance:
//
//	count   increments a global counter and answers it with its earlier
//	        values: {"count":1,"seen":[]} in every attempt, unless state
//	        leaks
//	env     the attempt's view of its environment: clocks, crypto/rand
//	        bytes, the time since start-up, the request
//	grow    allocates 32 MiB (the instance's memory grows)
//	spin    loops forever (stopped by the step timeout)
//	hog     allocates until memory runs out
//	flood   writes 1 MiB to stdout
//	fork    leaves a goroutine blocked and a map filled behind
//	file    creates /work/NAME (NAME from the input) and leaves it open;
//	        answers its descriptor
//	close2  closes stderr (descriptor 2)
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o stateless.wasm ./testdata/guests/go/stateless
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	Mode string `json:"mode"`
	Name string `json:"name"`
}

var (
	started = time.Now()
	count   int
	seen    []int
	cache   = map[string]int{}
	kept    [][]byte
	sink    byte
	opened  []*os.File
)

func main() {
	sdk.Run(handle, sdk.Stateless())
}

func handle(ctx *sdk.Context, raw json.RawMessage) (any, error) {
	var in input
	_ = json.Unmarshal(raw, &in) // a non-object input has no mode
	switch in.Mode {
	case "echo":
		return map[string]any{
			"input":   raw,
			"step":    ctx.Step,
			"attempt": ctx.Attempt,
			"item":    ctx.Item,
		}, nil
	case "error":
		return nil, errors.New("requested error")
	case "repair":
		return nil, sdk.NeedsRepair("requested repair")
	case "log":
		ctx.Logf(sdk.LevelInfo, "hello from %s", "guest")
		lease := "ok"
		if ctx.Heartbeat() != nil {
			lease = "lost"
		}
		return map[string]any{"logged": true, "lease": lease}, nil
	case "exit3":
		fmt.Fprintln(os.Stderr, "exit3: failing on purpose")
		os.Exit(3)
	case "count":
		count++
		out := map[string]any{"count": count, "seen": append([]int{}, seen...), "cached": len(cache)}
		seen = append(seen, count)
		cache[fmt.Sprint(ctx.Attempt, ctx.Item)] = count
		return out, nil
	case "env":
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		now := time.Now()
		return map[string]any{
			"now":        now.UTC().Format(time.RFC3339Nano),
			"since":      now.Sub(started).String(),
			"rand":       hex.EncodeToString(b),
			"task":       ctx.TaskID,
			"step":       ctx.Step,
			"attempt":    ctx.Attempt,
			"item":       ctx.Item,
			"repair":     ctx.Repair,
			"stdin_left": stdinLeft(),
		}, nil
	case "grow":
		b := make([]byte, 32<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		sink = b[len(b)-4096]
		return len(b), nil
	case "spin":
		for {
			sink++
		}
	case "hog":
		for {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = byte(i)
			}
			kept = append(kept, b)
		}
	case "flood":
		os.Stdout.WriteString(strings.Repeat("x", 1<<20))
		return nil, nil
	case "file":
		f, err := os.Create("/work/" + in.Name)
		if err != nil {
			return nil, err
		}
		opened = append(opened, f)
		return f.Fd(), nil
	case "close2":
		return "closed", syscall.Close(2)
	case "fork":
		block := make(chan int)
		go func() { <-block }()
		for i := range 1000 {
			cache[fmt.Sprint("k", i)] = i
		}
		return "forked", nil
	}
	return nil, errors.New("unknown mode")
}

// stdinLeft reads what is left of stdin after the request: nothing.
func stdinLeft() int {
	b := make([]byte, 64)
	n, _ := os.Stdin.Read(b)
	return n
}
