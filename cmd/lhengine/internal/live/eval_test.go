package live

import (
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vbauerster/mpb/v8"

	"github.com/lhengine/lhengine/cmd/lhengine/internal/evalrun"
)

// TestEvalProgressLine: on a terminal the progress is a bar per state
// with the runs done of its total and how many failed; a log line written
// meanwhile is printed whole, apart from the bars' frames.
func TestEvalProgressLine(t *testing.T) {
	t.Parallel()
	set := &evalrun.Set{Name: "s", Cases: []*evalrun.Case{{Name: "a", Repeat: 2}, {Name: "b", Repeat: 1}}}
	states, err := evalrun.States(set, []string{"p"})
	require.NoError(t, err)
	screen := &consoleLog{}
	p := newEvalWith(io.Discard, []mpb.ContainerOption{mpb.WithConsoleWriter(screen)}, set, states)
	p.Run(&evalrun.RunReport{State: "baseline", Case: "a", Repeat: 1, Measured: evalrun.Measured{Pass: true}})
	p.Run(&evalrun.RunReport{State: "without p", Case: "b", Repeat: 1})
	_, err = p.Write([]byte("a log line\n"))
	require.NoError(t, err)
	p.Finish()

	screen.mu.Lock()
	defer screen.mu.Unlock()
	require.Contains(t, screen.ops, "log: a log line\n", "the log line is written whole, on its own")
	var frames []string
	for _, op := range screen.ops {
		if f, ok := strings.CutPrefix(op, "frame: "); ok {
			require.NotContains(t, f, "a log line", "a log line inside a frame")
			frames = append(frames, f)
		}
	}
	require.NotEmpty(t, frames)
	require.Regexp(t, `^eval s · baseline \[[=>-]+\] 1/3 runs · 0 failed\n`+
		`eval s · without p \[[=>-]+\] 1/3 runs · 1 failed\n$`, frames[len(frames)-1])
}

// consoleLog is a terminal of 120 columns for mpb that records what is
// written to it: log output ("log: ") and each frame of bars ("frame: ").
type consoleLog struct {
	mu    sync.Mutex
	ops   []string
	frame strings.Builder
}

func (c *consoleLog) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, "log: "+string(b))
	return len(b), nil
}

func (c *consoleLog) ReadFrom(r io.Reader) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return io.Copy(&c.frame, r)
}

func (c *consoleLog) IsTerminal() bool { return true }

func (c *consoleLog) GetTermSize() (int, int, error) { return 120, 30, nil }

func (c *consoleLog) Flush(int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, "frame: "+c.frame.String())
	c.frame.Reset()
	return nil
}
