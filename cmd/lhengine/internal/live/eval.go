package live

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/evalrun"
)

// Eval shows how far an eval is. On a terminal it is a bar per
// state drawn by mpb (runs done of the state's total, how many failed);
// log lines written through it (it is the engine logger's output while
// the eval runs) are printed above the bars, never inside them. Elsewhere
// it prints a line per finished run.
type Eval struct {
	line
	name   string
	states []string
	total  map[string]int
	done   map[string]int
	failed map[string]int
	p      *mpb.Progress
	bars   map[string]*mpb.Bar
}

// NewEval shows on w the progress of set run in states.
func NewEval(w io.Writer, set *evalrun.Set, states []evalrun.StateResult) *Eval {
	var opts []mpb.ContainerOption
	if IsTerminal(w) {
		opts = append(opts, mpb.WithOutput(w))
	}
	return newEvalWith(w, opts, set, states)
}

// newEvalWith draws bars with opts when there are any (the output
// a terminal), else plain lines on w.
func newEvalWith(w io.Writer, opts []mpb.ContainerOption, set *evalrun.Set, states []evalrun.StateResult) *Eval {
	p := &Eval{line: line{w: w, tty: len(opts) > 0}, name: set.Name,
		total: map[string]int{}, done: map[string]int{}, failed: map[string]int{}}
	for _, st := range states {
		p.states = append(p.states, st.Name)
		for _, c := range set.Cases {
			p.total[st.Name] += c.Repeat
		}
	}
	if !p.tty {
		return p
	}
	p.p = mpb.New(append([]mpb.ContainerOption{mpb.WithWidth(30), mpb.WithRefreshRate(100 * time.Millisecond)}, opts...)...)
	p.bars = map[string]*mpb.Bar{}
	for _, st := range p.states {
		p.bars[st] = p.p.New(int64(max(p.total[st], 1)), mpb.BarStyle().Lbound("[").Filler("=").Tip(">").Padding("-").Rbound("]"),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return "eval " + p.name + " · " + st })),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return p.count(st) })))
	}
	return p
}

// count is the text right of a state's bar: "3/10 runs · 1 failed".
func (p *Eval) count(state string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%d/%d runs · %d failed", p.done[state], p.total[state], p.failed[state])
}

// Run takes a finished run (evalrun.Config.OnRun).
func (p *Eval) Run(rr *evalrun.RunReport) {
	p.mu.Lock()
	p.done[rr.State]++
	if !rr.Pass || rr.Error != "" || (rr.Crash != nil && !rr.Crash.Recovered) {
		p.failed[rr.State]++
	}
	if p.tty {
		p.mu.Unlock()
		// Told outside mu: the bar draws through count, which takes it.
		if b := p.bars[rr.State]; b != nil {
			b.Increment()
		}
		return
	}
	defer p.mu.Unlock()
	verdict := "pass"
	switch {
	case rr.Error != "":
		verdict = "error: " + rr.Error
	case !rr.Pass:
		verdict = "fail: " + rr.Reason
	}
	if rr.Crash != nil {
		if rr.Crash.Recovered {
			verdict += ", recovered"
		} else if rr.Error == "" {
			verdict += ", recovery failed: " + rr.Crash.Reason
		}
	}
	fmt.Fprintf(p.w, "%s · %s · run %d: %s (%d units, %d repairs, %.2fs) [%d/%d]\n", rr.State, rr.Case, rr.Repeat, verdict,
		rr.Attempts, rr.Repairs, rr.WallSeconds, p.done[rr.State], p.total[rr.State])
}

// Write prints log output: above the bars on a terminal, as is elsewhere.
func (p *Eval) Write(b []byte) (int, error) {
	if p.p != nil {
		n, err := p.p.Write(b)
		var done mpb.ErrDone[*mpb.Progress]
		if !errors.As(err, &done) {
			return n, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}

// Finish draws the last numbers and ends the bars.
func (p *Eval) Finish() {
	if p.p == nil {
		return
	}
	for _, b := range p.bars {
		b.Abort(false)
	}
	p.p.Wait()
}
