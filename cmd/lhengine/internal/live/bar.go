package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/lhengine/lhengine/api"
)

// How often the live display reads the task's progress: at most every
// liveFetchGap (a commit asks for a read), at least every liveTick (the
// elapsed time and the time left move without commits); off a terminal a
// plain line every livePlainEvery and at each step change.
const (
	liveFetchGap = 200 * time.Millisecond
	liveTick     = time.Second
	// liveReadWait bounds one read of the progress, and liveEndWait how
	// long finish waits for a read in flight: the display never holds up
	// the command it shows.
	liveReadWait   = 5 * time.Second
	liveEndWait    = 10 * time.Second
	livePlainEvery = 5 * time.Second
)

// Bar shows a task's progress while run, resume or submit --follow
// works or follows it. The numbers are the task's api.Progress, read
// through the API (the report), so they are those lhengine status shows:
// done / total of the counted step with its pass, percent, rate and time
// left ("time left unknown" where it cannot be told), the elapsed working
// time, the step the task is at, and the labelled counters.
//
// On a terminal it is a bar drawn by mpb with the counters on a line
// beneath; log lines written through it (it is the engine logger's output
// while it runs) are printed above the bar, never inside it. Elsewhere it
// prints the status line as plain text every livePlainEvery and whenever
// the step changes.
//
// Start begins its one goroutine; Finish draws the last numbers and ends
// it. Changed asks for a read soon; it never blocks.
type Bar struct {
	w     io.Writer
	tty   bool
	read  func(context.Context) (*api.Report, error)
	now   func() time.Time
	kick  chan struct{}
	stop  chan struct{}
	ended chan struct{}

	mu       sync.Mutex // guards what follows, and writes to w off mpb
	p        *mpb.Progress
	bar      *mpb.Bar
	counters *mpb.Bar
	head     string // left of the bar: name, elapsed
	tail     string // right of the bar: count, rate, time left, step
	under    string // the counters
	step     string // the step shown last (off a terminal)
	printed  time.Time
}

// NewBar shows on w the progress that read returns; tty says whether
// w is a terminal.
func NewBar(w io.Writer, tty bool, read func(context.Context) (*api.Report, error)) *Bar {
	return &Bar{w: w, tty: tty, read: read, now: time.Now,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), ended: make(chan struct{})}
}

// Start draws the bar and reads the progress until Finish.
func (b *Bar) Start(ctx context.Context) {
	if b.tty {
		b.p = mpb.NewWithContext(context.WithoutCancel(ctx), mpb.WithOutput(b.w), mpb.WithWidth(30),
			mpb.WithRefreshRate(100*time.Millisecond))
		b.bar = b.p.New(0, mpb.BarStyle().Lbound("[").Filler("=").Tip(">").Padding("-").Rbound("]"),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return b.text(&b.head) })),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return b.text(&b.tail) })))
	}
	b.Changed() // the first read at once
	go b.loop(ctx)
}

// text reads one of the drawn texts under mu.
func (b *Bar) text(s *string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return *s
}

// Changed says the task changed (a commit, a new record on the stream).
func (b *Bar) Changed() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

func (b *Bar) loop(ctx context.Context) {
	defer close(b.ended)
	t := time.NewTicker(liveTick)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.kick:
			// Reads are spaced: a commit a millisecond does not mean a
			// read a millisecond.
			if wait := liveFetchGap - b.now().Sub(last); wait > 0 {
				select {
				case <-b.stop:
					return
				case <-time.After(wait):
				}
			}
		}
		last = b.now()
		rctx, cancel := context.WithTimeout(ctx, liveReadWait)
		r, err := b.read(rctx)
		cancel()
		if err == nil {
			b.show(r, false)
		}
	}
}

// Finish shows the task's last numbers and ends the display.
func (b *Bar) Finish(ctx context.Context) {
	close(b.stop)
	select {
	case <-b.ended:
	case <-time.After(liveEndWait):
		// A read stuck past its own bound: show nothing more rather than
		// keep the command from ending.
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveReadWait)
	defer cancel()
	if r, err := b.read(rctx); err == nil {
		b.show(r, true)
	}
	if b.p != nil {
		b.mu.Lock()
		c := b.counters
		b.mu.Unlock()
		b.bar.Abort(false)
		if c != nil {
			c.Abort(false)
		}
		b.p.Wait()
	}
}

// show takes a read of the progress; last says it is the final one.
func (b *Bar) show(r *api.Report, last bool) {
	p := r.Progress
	if p == nil {
		return
	}
	head, tail := barTexts(r)
	under := counterText(p.Counters)
	if !b.tty {
		b.plain(r, under, last)
		return
	}
	b.mu.Lock()
	b.head, b.tail, b.under = head, tail, under
	addCounters := under != "" && b.counters == nil && !last
	b.mu.Unlock()
	// The bars are told outside mu: they draw through the decorators,
	// which take it.
	if p.Total != nil {
		b.bar.SetTotal(int64(max(*p.Total, 1)), false)
		b.bar.SetCurrent(int64(p.Done))
	} else {
		b.bar.SetTotal(1, false)
		b.bar.SetCurrent(0)
	}
	if addCounters {
		c := b.p.New(0, mpb.NopStyle(),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return "  " + b.text(&b.under) })))
		b.mu.Lock()
		b.counters = c
		b.mu.Unlock()
	}
}

// plain prints the status line off a terminal when the step changed,
// livePlainEvery after the last, and at the end.
func (b *Bar) plain(r *api.Report, under string, last bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	step := stepText(&r.Task)
	now := b.now()
	if !last && step == b.step && now.Sub(b.printed) < livePlainEvery {
		return
	}
	line := r.Progress.Line() + " · " + step
	if under != "" {
		line += " · " + under
	}
	fmt.Fprintln(b.w, line)
	b.step, b.printed = step, now
}

// barTexts are the texts left and right of the bar: "site-audit 1h12m"
// and "1,840 / 3,000 pages (61%) · 24 pages/s · about 48 min left · step
// 2/3 check".
func barTexts(r *api.Report) (head, tail string) {
	p := r.Progress
	head = p.Name + " " + api.Duration(time.Duration(p.ElapsedS*float64(time.Second)))
	var parts []string
	count := api.Thousands(int64(p.Done))
	if p.Total != nil {
		count += " / " + api.Thousands(int64(*p.Total)) + " " + p.Unit
		if p.Percent != nil {
			count += fmt.Sprintf(" (%d%%)", int(*p.Percent))
		}
	} else {
		count += " " + p.Unit + " / total not known yet"
	}
	parts = append(parts, count)
	if p.RatePerS != nil {
		parts = append(parts, strings.TrimSuffix(fmt.Sprintf("%.1f", *p.RatePerS), ".0")+" "+p.Unit+"/s")
	}
	switch {
	case p.EtaS != nil:
		parts = append(parts, "about "+api.Duration(time.Duration(*p.EtaS*float64(time.Second)))+" left")
	case !api.Status(p.Status).Terminal():
		parts = append(parts, "time left unknown")
	default:
		parts = append(parts, p.Status)
	}
	step := stepText(&r.Task)
	if p.Pass > 1 {
		step += fmt.Sprintf(" · pass %d", p.Pass)
	}
	parts = append(parts, step)
	return head, strings.Join(parts, " · ")
}

// stepText is the step the task is at: "step 2/3 check".
func stepText(t *api.Task) string {
	if t == nil || len(t.Steps) == 0 {
		return "step -"
	}
	i := min(t.Cursor, len(t.Steps)-1)
	return fmt.Sprintf("step %d/%d %s", i+1, len(t.Steps), t.Steps[i].Name)
}

// counterText is the labelled counters on one line: "pages checked 120 ·
// broken links 3".
func counterText(cs []api.Counter) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Label + " " + api.Thousands(c.Value)
	}
	return strings.Join(parts, " · ")
}

// Write prints log output: above the bar on a terminal, as is elsewhere.
func (b *Bar) Write(p []byte) (int, error) {
	if b.p != nil {
		n, err := b.p.Write(p)
		var done mpb.ErrDone[*mpb.Progress]
		if !errors.As(err, &done) {
			return n, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Write(p)
}
