package live

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
)

// Compile shows on a terminal what a submission is doing while its
// plugins load (the first load of a large plugin compiles it, which takes
// seconds): "loading plugins: 1/3 ready · compiling draft.wasm (3.5 MB),
// verify.wasm (3.5 MB) · 4s". It draws nothing elsewhere, and clears its
// line when done.
type Compile struct {
	line
	now     func() time.Time
	start   time.Time
	loading []string // plugins being loaded, in the order they began
	sizes   map[string]int
	ready   int
}

// NewCompile shows the plugin loads on w, timed by now.
func NewCompile(w io.Writer, now func() time.Time) *Compile {
	return &Compile{line: newLine(w), now: now, start: now(), sizes: map[string]int{}}
}

// Event takes one plugin load of the submission (engine.Config.OnCompile).
func (p *Compile) Event(ev engine.CompileEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		return
	}
	if ev.Done {
		for i, n := range p.loading {
			if n == ev.Plugin {
				p.loading = append(p.loading[:i], p.loading[i+1:]...)
				break
			}
		}
		p.ready++
	} else {
		p.loading = append(p.loading, ev.Plugin)
		p.sizes[ev.Plugin] = ev.Size
	}
	p.render()
}

// tick redraws the line with the time elapsed, once a plugin load began.
func (p *Compile) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.ready+len(p.loading) > 0 {
		p.render()
	}
}

// Ticking redraws the line every second, so that the time elapsed moves
// while a plugin compiles, until stop, which returns once the ticking
// ended. Off a terminal it does nothing.
func (p *Compile) Ticking() (stop func()) {
	if !p.tty {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.tick()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// render draws the line; the caller holds mu.
func (p *Compile) render() {
	total := p.ready + len(p.loading)
	names := make([]string, len(p.loading))
	for i, n := range p.loading {
		names[i] = fmt.Sprintf("%s (%.1f MB)", filepath.Base(n), float64(p.sizes[n])/1e6)
	}
	line := fmt.Sprintf("loading plugins: %d/%d ready", p.ready, total)
	if len(names) > 0 {
		line += " · compiling " + strings.Join(names, ", ")
	}
	line += fmt.Sprintf(" · %s", p.now().Sub(p.start).Round(time.Second))
	p.draw(line)
}

// Remote says, on a terminal, that the home's owner o loads the plugins.
func (p *Compile) Remote(o *api.Owner, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.draw(fmt.Sprintf("submitting %s to %s, which loads (and first compiles) its plugins", filepath.Base(path), o))
	}
}

// Finish clears the line.
func (p *Compile) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn != "" {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = ""
	}
}
