package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"

	"github.com/lhengine/lhengine/plugins/examples/site-audit/site/sitegen"
)

func TestScanTolerant(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		doc  string
		want page
	}{
		{"plain", `<html><head><title>Hello &amp; bye</title><meta name="description" content="d"></head><body><h1>Top <em>one</em></h1><a href="/a">a</a><img src="x.png" alt="x"></body></html>`,
			page{HasTitle: true, Title: "Hello & bye", HasDescription: true, H1: "Top one", Links: []string{"/a"}, Images: 1}},
		{"capitals, single and no quotes", `<HTML><TITLE> T </TITLE><META content='c' NAME=Description /><A HREF=b.html>b</A><IMG SRC=y.png>`,
			page{HasTitle: true, Title: "T", HasDescription: true, Links: []string{"b.html"}, Images: 1, ImagesWithoutAlt: []string{"y.png"}}},
		{"title in a comment and a script is not the title", `<!-- <title>no</title> --><script>var s = '<title>no</title>';</script><p>x</p>`,
			page{}},
		{"empty title", `<title>  </title><meta name="description" content="">`, page{}},
		{"empty alt is an alt", `<img alt="" src=z.png><img alt src=w.png>`, page{Images: 2}},
		{"first h1 and first title win", `<title>a</title><title>b</title><h1>x</h1><h1>y</h1>`, page{HasTitle: true, Title: "a", H1: "x"}},
		{"h1x is not h1's end", `<h1>a</h1x>b</h1>`, page{H1: "ab"}},
		{"unterminated", `<title>open`, page{HasTitle: true, Title: "open"}},
		{"broken markup", `< a href=x> <a href="unclosed <img`, page{}},
		{"a stray less-than", `1 < 2 <a href=ok>`, page{Links: []string{"ok"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := scan(c.doc)
			if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", c.want) {
				t.Fatalf("scan(%q)\n got %#v\nwant %#v", c.doc, got, c.want)
			}
		})
	}
}

// httpFetcher does check's fetches with net/http against the loopback site
// and keeps the counts and notes of the attempt that succeeds.
type httpFetcher struct {
	counts map[string]int64
	notes  []string
}

func (f *httpFetcher) Fetch(req sdk.FetchRequest) (*sdk.FetchResponse, error) {
	method := req.Method
	if method == "" {
		method = "GET"
	}
	r, err := http.NewRequest(method, req.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &sdk.FetchResponse{Status: resp.StatusCode, Body: string(body), URL: req.URL}, nil
}

func (f *httpFetcher) Count(name string, delta int64) error { f.counts[name] += delta; return nil }
func (f *httpFetcher) Note(kind, text string) error {
	f.notes = append(f.notes, kind+" "+text)
	return nil
}

// TestCheckFindsWhatWasPlanted checks every page of a generated site of
// 500 pages, served on loopback, as the fan-out would (an attempt that
// fails is tried again, and only a successful attempt's counts are kept):
// the counts equal the planted ones, and each problem has its note.
func TestCheckFindsWhatWasPlanted(t *testing.T) {
	t.Parallel()
	site := sitegen.Generate(500, 7)
	srv := httptest.NewServer(site)
	defer srv.Close()
	total := map[string]int64{}
	notes, retried := 0, 0
	for i := 1; i <= 500; i++ {
		in := Input{URL: fmt.Sprintf("%s/pages/%d.html", srv.URL, i), Site: srv.URL}
		var f *httpFetcher
		var err error
		for try := 0; try < 2; try++ {
			f = &httpFetcher{counts: map[string]int64{}}
			if _, err = check(f, in); err == nil {
				break
			}
			retried++
		}
		if err != nil {
			t.Fatalf("%s: %v", in.URL, err)
		}
		for k, n := range f.counts {
			total[k] += n
		}
		notes += len(f.notes)
	}
	p := site.Planted()
	want := map[string]int64{"pages": 500, "missing_title": int64(p.MissingTitle), "missing_description": int64(p.MissingDescription),
		"broken_links": int64(p.BrokenLinks), "images_without_alt": int64(p.ImagesWithoutAlt)}
	for k, n := range want {
		if total[k] != n {
			t.Errorf("%s: counted %d, planted %d", k, total[k], n)
		}
		if n == 0 {
			t.Errorf("%s: nothing planted in 500 pages", k)
		}
	}
	if len(total) != len(want) {
		t.Errorf("counters %v, want only %v", total, want)
	}
	if retried != p.FailOnce {
		t.Errorf("%d attempts failed, %d pages fail once", retried, p.FailOnce)
	}
	if want := int(total["missing_title"] + total["missing_description"] + total["broken_links"] + total["images_without_alt"]); notes != want {
		t.Errorf("%d notes, want one per problem: %d", notes, want)
	}
	if s := site.Stats(); s.Writes != 0 {
		t.Errorf("%d writes to the site", s.Writes)
	}
}

func TestCheckRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, in := range []Input{{URL: "", Site: "http://127.0.0.1:1"}, {URL: "pages/1.html", Site: "http://127.0.0.1:1"}, {URL: "http://127.0.0.1:1/p", Site: "::"}} {
		f := &httpFetcher{counts: map[string]int64{}}
		if _, err := check(f, in); err == nil || !strings.Contains(err.Error(), "not an absolute URL") {
			t.Errorf("check(%+v): %v, want a clear error", in, err)
		}
	}
}
