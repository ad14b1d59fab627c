package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadStream(t *testing.T) {
	t.Parallel()
	in := ": keep-alive\n\nid: 3\nevent: event\ndata: {\"seq\":3}\n\nevent: task\ndata: {\"a\":\ndata: 1}\n\nevent: end\ndata: {}\n\nevent: event\ndata: {}\n\n"
	var got []string
	err := readStream(strings.NewReader(in), func(typ string, data []byte) (bool, error) {
		got = append(got, typ+" "+string(data))
		return typ != "end", nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{`event {"seq":3}`, "task {\"a\":\n1}", "end {}"}, got)

	err = readStream(strings.NewReader("event: error\ndata: {\"code\":\"not_found\",\"error\":\"gone\"}\n\n"),
		func(string, []byte) (bool, error) { return true, nil })
	var ae *Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "gone", ae.Message)

	err = readStream(strings.NewReader("event: event\ndata: {}\n"), func(string, []byte) (bool, error) { return true, nil })
	require.True(t, errors.Is(err, errStreamEnded), "a stream cut in the middle of a message ends it: %v", err)
}

// FuzzReadStream: whatever an owner (or something posing as one) sends,
// the reader returns without panicking and hands on only what it parsed.
func FuzzReadStream(f *testing.F) {
	f.Add("event: event\ndata: {}\n\n")
	f.Add(": c\n\nevent: error\ndata: x\n\n")
	f.Add("data: a\ndata: b\n\n\n\nevent:\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		n := 0
		_ = readStream(strings.NewReader(in), func(typ string, data []byte) (bool, error) {
			n++
			if n > len(in)+1 {
				t.Fatalf("more messages (%d) than the input could hold", n)
			}
			return true, nil
		})
	})
}
