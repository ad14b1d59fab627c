// Command suggest is the site-audit example's step that runs once a person
// approved it: for each page without a title it proposes one, made from the
// page's first heading (or, without one, from its address) and the site's
// name. The same pages give the same suggestions: no model is involved.
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/site-audit/suggest.wasm ./plugins/examples/site-audit/suggest
package main

import (
	"path"
	"strings"
	"unicode/utf8"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Input is the pages that have no title.
type Input struct {
	SiteName string `json:"site_name"`
	Pages    []struct {
		URL string `json:"url"`
		H1  string `json:"h1"`
	} `json:"pages"`
}

// Suggestion is one title rewrite.
type Suggestion struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	From  string `json:"from"` // "h1" or "url"
}

// Output is the suggestions, in the order of the input's pages.
type Output struct {
	Suggestions []Suggestion `json:"suggestions"`
}

// maxTitle is the length past which a suggested title is cut (in bytes,
// at a word boundary), the length search results show.
const maxTitle = 60

func suggest(_ *sdk.Context, in Input) (Output, error) {
	out := Output{Suggestions: []Suggestion{}}
	for _, p := range in.Pages {
		s := Suggestion{URL: p.URL, From: "h1"}
		head := strings.Join(strings.Fields(p.H1), " ")
		if head == "" {
			s.From = "url"
			base := strings.TrimSuffix(path.Base(p.URL), path.Ext(p.URL))
			head = "Page " + strings.ReplaceAll(base, "-", " ")
		}
		title := head
		if in.SiteName != "" {
			title += " | " + in.SiteName
		}
		for len(title) > maxTitle {
			cut := strings.LastIndexByte(title[:maxTitle], ' ')
			if cut <= 0 { // one long word: cut it, at a character boundary
				title = title[:maxTitle]
				for !utf8.ValidString(title) {
					title = title[:len(title)-1]
				}
				break
			}
			title = title[:cut]
		}
		s.Title = title
		out.Suggestions = append(out.Suggestions, s)
	}
	return out, nil
}

func main() { sdk.Run(suggest) }
