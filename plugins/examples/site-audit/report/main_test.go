package main

import (
	"strings"
	"testing"
)

func TestBuildCountsDuplicatesPerPage(t *testing.T) {
	t.Parallel()
	in := Input{Site: "http://127.0.0.1:1", Pages: []Page{
		{URL: "/1", Title: "A"},
		{URL: "/2", Title: "B", BrokenLinks: []string{"/x", "/y"}},
		{URL: "/3", Title: "A", MissingDescription: true, ImagesWithoutAlt: 2},
		{URL: "/4", MissingTitle: true},
		{URL: "/5", MissingTitle: true}, // two pages without a title do not share one
		{URL: "/6", Title: "A"},
		{URL: "/7", Title: "C"},
		{URL: "/8", Title: "C"},
	}, Suggestions: []Suggestion{{URL: "/4", Title: "Four"}, {URL: "/5", Title: "Five"}}}
	r := build(in)
	want := Totals{Pages: 8, MissingTitle: 2, MissingDescription: 1, DuplicateTitle: 5, BrokenLinks: 2, ImagesWithoutAlt: 2, TitleSuggestions: 2}
	if r.Totals != want {
		t.Fatalf("totals %+v, want %+v", r.Totals, want)
	}
	if len(r.DuplicateTitles) != 2 || r.DuplicateTitles[0].Title != "A" || len(r.DuplicateTitles[0].Pages) != 3 {
		t.Fatalf("duplicates %+v", r.DuplicateTitles)
	}
	md := markdown(r)
	for _, s := range []string{"| pages sharing their title with another | 5 |", "| /4 | Four |", "- /2 links to /y"} {
		if !strings.Contains(md, s) {
			t.Errorf("the markdown lacks %q:\n%s", s, md)
		}
	}
}
