package main

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestSuggest(t *testing.T) {
	t.Parallel()
	var in Input
	if err := json.Unmarshal([]byte(`{"site_name":"Example Site","pages":[
		{"url":"http://h/pages/4.html","h1":"  Quick   garden guide 4 "},
		{"url":"http://h/pages/gone-page.html","h1":""},
		{"url":"http://h/pages/9.html","h1":"A very long heading about gardens, kitchens, bicycles and cameras of every kind"},
		{"url":"http://h/pages/7.html","h1":"xééééééééééééééééééééééééééééééééééééééééééé"}]}`), &in); err != nil {
		t.Fatal(err)
	}
	out, err := suggest(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Suggestion{
		{URL: "http://h/pages/4.html", Title: "Quick garden guide 4 | Example Site", From: "h1"},
		{URL: "http://h/pages/gone-page.html", Title: "Page gone page | Example Site", From: "url"},
		{URL: "http://h/pages/9.html", Title: "A very long heading about gardens, kitchens, bicycles and", From: "h1"},
	}
	for i, w := range want {
		if out.Suggestions[i] != w {
			t.Errorf("suggestion %d: %+v, want %+v", i, out.Suggestions[i], w)
		}
	}
	if s := out.Suggestions[3].Title; len(s) > maxTitle || !utf8.ValidString(s) {
		t.Errorf("a long word is cut to at most %d bytes of valid UTF-8: %q", maxTitle, s)
	}
}
