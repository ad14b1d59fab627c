package server

import (
	"encoding/json"
	"testing"
)

// TestPrettyJSONShowsHTMLCharacters: the escapes Go's encoder writes for
// <, > and & are shown as the characters (the page's template escapes
// them); every other escape, and an escaped backslash before "u003c",
// stays as it is; what is not JSON is shown as it is.
func TestPrettyJSONShowsHTMLCharacters(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a":"\u003cb\u003e \u0026 \u003C"}`: "{\n  \"a\": \"<b> & <\"\n}",
		`["\\u003c", "\u00e9", "\"\u003e"]`:   "[\n  \"\\\\u003c\",\n  \"\\u00e9\",\n  \"\\\"\u003e\"\n]",
		`{"n": 1e400}`:                        "{\n  \"n\": 1e400\n}",
		`not json \u003c`:                     `not json \u003c`,
		``:                                    ``,
	} {
		if got := prettyJSON(json.RawMessage(in)); got != want {
			t.Errorf("prettyJSON(%s) = %q, want %q", in, got, want)
		}
	}
}
