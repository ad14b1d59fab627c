// Command words is the polyglot example's first step, in Go: it splits the
// input's text into lower-case words (letters and digits; anything else
// separates them) and counts them (progress.count "words").
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/polyglot/words.wasm ./plugins/examples/polyglot/words
package main

import (
	"strings"
	"unicode"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Input is the text to split.
type Input struct {
	Text string `json:"text"`
}

// Output is the words, in order.
type Output struct {
	Lang  string   `json:"lang"`
	Words []string `json:"words"`
}

func main() {
	sdk.Run(func(ctx *sdk.Context, in Input) (Output, error) {
		words := strings.FieldsFunc(strings.ToLower(in.Text), func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		})
		if words == nil {
			words = []string{}
		}
		if err := ctx.Count("words", int64(len(words))); err != nil {
			return Output{}, err
		}
		return Output{Lang: "go", Words: words}, nil
	})
}
