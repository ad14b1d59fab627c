// Package sitegen generates the site the site-audit example audits: N pages
// made deterministically from a seed, with problems planted at known counts,
// served over HTTP with a sitemap and the planted counts.
//
// Routes (GET and HEAD only; anything else is 405 and counted as a write):
//
//	/sitemap.xml       every page's URL, absolute, on the host the request named
//	/pages/N.html      page N (1 to N)
//	/planted.json      the planted counts (Planted)
//	/stats.json        what the server was asked (Stats)
//
// Everything else is 404, which is what a broken link points at. A slow
// page answers a GET after Delay; a page that fails once answers its first
// GET with 500 and every later one with 200. HEAD requests are never slow
// and never fail: a link checker's HEAD is answered at once.
package sitegen

import (
	"encoding/json"
	"fmt"
	"html"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Delay is how long a slow page takes to answer a GET.
const Delay = 200 * time.Millisecond

// Planted is what the generator put into the site. The finding counts are
// what a correct audit reports.
type Planted struct {
	Pages int `json:"pages"`
	// MissingTitle: pages without a <title>, or with an empty one.
	MissingTitle int `json:"missing_title"`
	// MissingDescription: pages without <meta name="description">.
	MissingDescription int `json:"missing_description"`
	// DuplicateTitle: pages whose (non-empty) title another page has too.
	DuplicateTitle int `json:"duplicate_title"`
	// BrokenLinks: links to the site's own URLs that answer 404, each
	// distinct link of a page once.
	BrokenLinks int `json:"broken_links"`
	// ImagesWithoutAlt: <img> elements without an alt attribute.
	ImagesWithoutAlt int `json:"images_without_alt"`
	// FailOnce: pages whose first GET answers 500.
	FailOnce int `json:"fail_once"`
	// Slow: pages that answer a GET after Delay.
	Slow int `json:"slow"`
}

// Stats counts the requests the site answered.
type Stats struct {
	Gets      int64 `json:"gets"`
	Heads     int64 `json:"heads"`
	Writes    int64 `json:"writes"`     // requests of any other method (refused)
	Failed500 int64 `json:"failed_500"` // first GETs of fail-once pages answered 500
}

type page struct {
	title    string // "" for a missing title
	noTitle  bool   // no <title> element at all (else an empty one when title is "")
	desc     bool
	h1       string
	links    []string // hrefs, distinct, some relative
	broken   int      // how many of links answer 404
	images   []bool   // per image: has an alt
	upper    bool     // tags written in capitals
	failOnce bool
	slow     bool
}

// Site is a generated site. Its handler is safe for concurrent use.
type Site struct {
	pages   []page
	planted Planted
	failed  []atomic.Bool // per page: the one 500 was served
	delay   time.Duration

	mu    sync.Mutex
	stats Stats
}

var (
	adjectives = []string{"Quick", "Quiet", "Bright", "Hidden", "Practical", "Modern", "Classic", "Simple", "Complete", "Gentle"}
	nouns      = []string{"garden", "kitchen", "bicycle", "camera", "notebook", "lantern", "teapot", "compass", "backpack", "violin"}
)

// Generate makes a site of n pages (n ≥ 1) from seed; the same n and seed
// make the same site.
func Generate(n int, seed uint64) *Site {
	if n < 1 {
		n = 1
	}
	r := rand.New(rand.NewPCG(seed, 0x5173a0d17))
	s := &Site{pages: make([]page, n), failed: make([]atomic.Bool, n), delay: Delay}
	for i := range s.pages {
		p := &s.pages[i]
		num := i + 1
		topic := adjectives[r.IntN(len(adjectives))] + " " + nouns[r.IntN(len(nouns))]
		p.h1 = fmt.Sprintf("%s guide %d", topic, num)
		p.title = fmt.Sprintf("%s, part %d", topic, num)
		p.upper = r.IntN(10) == 0
		switch {
		case r.IntN(100) < 3:
			p.title = ""
			p.noTitle = r.IntN(2) == 0
		case i > 0 && r.IntN(100) < 2:
			// The title of an earlier page that has one.
			for range 10 {
				if t := s.pages[r.IntN(i)].title; t != "" {
					p.title = t
					break
				}
			}
		}
		p.desc = r.IntN(100) >= 5
		seen := map[int]bool{num: true}
		for k := range 3 + r.IntN(3) {
			target := 1 + r.IntN(n)
			if seen[target] {
				continue
			}
			seen[target] = true
			switch k % 3 {
			case 0:
				p.links = append(p.links, fmt.Sprintf("/pages/%d.html", target))
			case 1:
				p.links = append(p.links, fmt.Sprintf("%d.html", target)) // relative to /pages/
			default:
				p.links = append(p.links, fmt.Sprintf("/pages/%d.html#top", target))
			}
		}
		if r.IntN(100) < 4 {
			p.links = append(p.links, fmt.Sprintf("/pages/gone-%d.html", num))
			p.broken = 1
		}
		for range r.IntN(4) {
			p.images = append(p.images, r.IntN(100) >= 6)
		}
		p.failOnce = r.IntN(100) < 1
		p.slow = r.IntN(100) < 2
	}
	s.planted = count(s.pages)
	return s
}

// count is the planted counts of pages, from the model (not from HTML).
func count(pages []page) Planted {
	c := Planted{Pages: len(pages)}
	titles := map[string]int{}
	for _, p := range pages {
		if p.title == "" {
			c.MissingTitle++
		} else {
			titles[p.title]++
		}
		if !p.desc {
			c.MissingDescription++
		}
		c.BrokenLinks += p.broken
		for _, alt := range p.images {
			if !alt {
				c.ImagesWithoutAlt++
			}
		}
		if p.failOnce {
			c.FailOnce++
		}
		if p.slow {
			c.Slow++
		}
	}
	for _, n := range titles {
		if n > 1 {
			c.DuplicateTitle += n
		}
	}
	return c
}

// Planted is what was planted.
func (s *Site) Planted() Planted { return s.planted }

// Stats is what the site was asked so far.
func (s *Site) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Site) note(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// ServeHTTP answers the routes in the package comment.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.note(func(st *Stats) { st.Gets++ })
	case http.MethodHead:
		s.note(func(st *Stats) { st.Heads++ })
	default:
		s.note(func(st *Stats) { st.Writes++ })
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only site", http.StatusMethodNotAllowed)
		return
	}
	switch path := r.URL.Path; {
	case path == "/sitemap.xml":
		s.sitemap(w, r)
	case path == "/planted.json":
		writeJSON(w, s.planted)
	case path == "/stats.json":
		writeJSON(w, s.Stats())
	case strings.HasPrefix(path, "/pages/") && strings.HasSuffix(path, ".html"):
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(path, "/pages/"), ".html"))
		if err != nil || n < 1 || n > len(s.pages) || strconv.Itoa(n) != strings.TrimSuffix(strings.TrimPrefix(path, "/pages/"), ".html") {
			http.NotFound(w, r)
			return
		}
		s.page(w, r, n)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

func (s *Site) sitemap(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n")
	base := "http://" + r.Host
	for i := range s.pages {
		fmt.Fprintf(&b, "  <url><loc>%s/pages/%d.html</loc></url>\n", base, i+1)
	}
	b.WriteString("</urlset>\n")
	w.Header().Set("Content-Type", "application/xml")
	w.Write([]byte(b.String()))
}

func (s *Site) page(w http.ResponseWriter, r *http.Request, n int) {
	p := &s.pages[n-1]
	if r.Method == http.MethodGet {
		if p.failOnce && s.failed[n-1].CompareAndSwap(false, true) {
			s.note(func(st *Stats) { st.Failed500++ })
			http.Error(w, "temporarily unavailable", http.StatusInternalServerError)
			return
		}
		if p.slow {
			t := time.NewTimer(s.delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte(render(p, n)))
}

// render writes page n as HTML, varying the spelling (capitals, quotes,
// comments) the way hand-written pages do.
func render(p *page, n int) string {
	tag := func(s string) string {
		if p.upper {
			return strings.ToUpper(s)
		}
		return s
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<" + tag("html") + " lang=en>\n<" + tag("head") + ">\n")
	b.WriteString("<meta charset=\"utf-8\">\n<!-- <title>not the title</title> -->\n")
	if !p.noTitle {
		b.WriteString("<" + tag("title") + ">" + html.EscapeString(p.title) + "</" + tag("title") + ">\n")
	}
	if p.desc {
		if n%2 == 0 {
			fmt.Fprintf(&b, "<meta name=\"description\" content=\"All about %s.\">\n", html.EscapeString(p.h1))
		} else {
			fmt.Fprintf(&b, "<meta content='All about %s.' name=description />\n", html.EscapeString(p.h1))
		}
	}
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width\">\n")
	b.WriteString("<script>if (1 < 2) { document.title = '<title>x</title>'; }</script>\n")
	b.WriteString("</" + tag("head") + ">\n<" + tag("body") + ">\n")
	fmt.Fprintf(&b, "<%s>%s</%s>\n", tag("h1"), html.EscapeString(p.h1), tag("h1"))
	b.WriteString("<p>Notes &amp; tips, written for people who like things to work.</p>\n<ul>\n")
	for _, l := range p.links {
		fmt.Fprintf(&b, "  <li><%s href=\"%s\">see also</%s></li>\n", tag("a"), l, tag("a"))
	}
	if n%10 == 0 {
		b.WriteString("  <li><a href=\"https://example.org/elsewhere\">elsewhere</a> <a href=\"mailto:editor@example.org\">mail us</a> <a href=\"#top\">top</a></li>\n")
	}
	b.WriteString("</ul>\n")
	for k, alt := range p.images {
		if alt {
			fmt.Fprintf(&b, "<%s src=\"/img/%d-%d.png\" alt=\"figure %d\">\n", tag("img"), n, k, k+1)
		} else {
			fmt.Fprintf(&b, "<%s src=/img/%d-%d.png width=320>\n", tag("img"), n, k)
		}
	}
	b.WriteString("</" + tag("body") + ">\n</" + tag("html") + ">\n")
	return b.String()
}
