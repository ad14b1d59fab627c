package live

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// On a terminal a status line (the compile line, eval's line) is redrawn
// in place; a log line written meanwhile must start on a line of its own
// and be followed by the status line again, never glued to it.
func TestLogLinesNeverLandInTheProgressLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := &line{w: &buf, tty: true}
	p.draw("1/4 units · step 1/1 a · running")
	_, err := p.Write([]byte("2026-12-01T19:47:05Z [WARN] lhengine: something\n"))
	require.NoError(t, err)
	_, err = p.Write([]byte("no newline at the end"))
	require.NoError(t, err)
	p.end()

	out := buf.String()
	require.Equal(t, "\r\033[K1/4 units · step 1/1 a · running"+
		"\r\033[K2026-12-01T19:47:05Z [WARN] lhengine: something\n"+
		"1/4 units · step 1/1 a · running"+
		"\r\033[Kno newline at the end\n"+
		"1/4 units · step 1/1 a · running\n", out)
	for _, line := range strings.Split(out, "\n") {
		require.False(t, strings.Contains(line, "running2026"), "a log line glued to the progress line: %q", line)
	}

	// Before anything is drawn, and off a terminal, log output passes as is.
	buf.Reset()
	q := &line{w: &buf}
	_, err = q.Write([]byte("plain\n"))
	require.NoError(t, err)
	require.Equal(t, "plain\n", buf.String())
}
