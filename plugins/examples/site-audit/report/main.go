// Command report is the site-audit example's last step: from every page's
// check output it finds the duplicate titles (pages whose title another
// page has too: counted and noted here, since no single page can tell),
// totals the findings, and writes the audit as two artifacts, report.md for
// people and report.json for programs. Its output is their refs and the
// totals.
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/site-audit/report.wasm ./plugins/examples/site-audit/report
package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Page is one page's check output (the fields the report reads).
type Page struct {
	URL                string   `json:"url"`
	Title              string   `json:"title"`
	MissingTitle       bool     `json:"missing_title"`
	MissingDescription bool     `json:"missing_description"`
	BrokenLinks        []string `json:"broken_links"`
	LinksChecked       int      `json:"links_checked"`
	ImagesWithoutAlt   int      `json:"images_without_alt"`
}

// Input is the site, the checked pages and the suggested titles.
type Input struct {
	Site        string       `json:"site"`
	Pages       []Page       `json:"pages"`
	Suggestions []Suggestion `json:"suggestions"`
}

// Suggestion is a title rewrite from the suggest step.
type Suggestion struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

// Totals are the audit's counts; the finding names are the counters'.
type Totals struct {
	Pages              int `json:"pages"`
	MissingTitle       int `json:"missing_title"`
	MissingDescription int `json:"missing_description"`
	DuplicateTitle     int `json:"duplicate_title"`
	BrokenLinks        int `json:"broken_links"`
	ImagesWithoutAlt   int `json:"images_without_alt"`
	LinksChecked       int `json:"links_checked"`
	TitleSuggestions   int `json:"title_suggestions"`
}

// Duplicate is a title shared by several pages.
type Duplicate struct {
	Title string   `json:"title"`
	Pages []string `json:"pages"`
}

// Report is report.json.
type Report struct {
	Site            string       `json:"site"`
	Totals          Totals       `json:"totals"`
	MissingTitle    []string     `json:"missing_title"`
	MissingDesc     []string     `json:"missing_description"`
	DuplicateTitles []Duplicate  `json:"duplicate_titles"`
	BrokenLinks     []BrokenLink `json:"broken_links"`
	ImagesWithout   []PageCount  `json:"images_without_alt"`
	Suggestions     []Suggestion `json:"title_suggestions"`
}

// BrokenLink is a link that answered 404 or 410, and the page it is on.
type BrokenLink struct {
	Page   string `json:"page"`
	Target string `json:"target"`
}

// PageCount is a page and how many of something it has.
type PageCount struct {
	Page  string `json:"page"`
	Count int    `json:"count"`
}

// Output is the step's output.
type Output struct {
	Markdown string `json:"markdown"` // artifact ref of report.md
	JSON     string `json:"json"`     // artifact ref of report.json
	Totals   Totals `json:"totals"`
}

// reporter is the part of the context report uses.
type reporter interface {
	Count(name string, delta int64) error
	Note(kind, text string) error
	PutArtifact(name, mediaType string, data []byte) (sdk.Ref, error)
}

// build makes the report from the input: pure, so the same pages give the
// same report.
func build(in Input) Report {
	r := Report{Site: in.Site, MissingTitle: []string{}, MissingDesc: []string{}, DuplicateTitles: []Duplicate{},
		BrokenLinks: []BrokenLink{}, ImagesWithout: []PageCount{}, Suggestions: in.Suggestions}
	if r.Suggestions == nil {
		r.Suggestions = []Suggestion{}
	}
	byTitle := map[string][]string{}
	for _, p := range in.Pages {
		r.Totals.Pages++
		r.Totals.LinksChecked += p.LinksChecked
		if p.MissingTitle {
			r.MissingTitle = append(r.MissingTitle, p.URL)
		} else {
			byTitle[p.Title] = append(byTitle[p.Title], p.URL)
		}
		if p.MissingDescription {
			r.MissingDesc = append(r.MissingDesc, p.URL)
		}
		for _, l := range p.BrokenLinks {
			r.BrokenLinks = append(r.BrokenLinks, BrokenLink{Page: p.URL, Target: l})
		}
		if p.ImagesWithoutAlt > 0 {
			r.ImagesWithout = append(r.ImagesWithout, PageCount{Page: p.URL, Count: p.ImagesWithoutAlt})
			r.Totals.ImagesWithoutAlt += p.ImagesWithoutAlt
		}
	}
	for title, pages := range byTitle {
		if len(pages) > 1 {
			r.DuplicateTitles = append(r.DuplicateTitles, Duplicate{Title: title, Pages: pages})
			r.Totals.DuplicateTitle += len(pages)
		}
	}
	sort.Slice(r.DuplicateTitles, func(i, j int) bool { return r.DuplicateTitles[i].Title < r.DuplicateTitles[j].Title })
	r.Totals.MissingTitle = len(r.MissingTitle)
	r.Totals.MissingDescription = len(r.MissingDesc)
	r.Totals.BrokenLinks = len(r.BrokenLinks)
	r.Totals.TitleSuggestions = len(r.Suggestions)
	return r
}

// markdown is the report for people.
func markdown(r Report) string {
	var b strings.Builder
	t := r.Totals
	fmt.Fprintf(&b, "# Site audit of %s\n\n", r.Site)
	fmt.Fprintf(&b, "%d pages checked, %d links followed.\n\n", t.Pages, t.LinksChecked)
	b.WriteString("| finding | count |\n|---|---:|\n")
	fmt.Fprintf(&b, "| pages without a title | %d |\n", t.MissingTitle)
	fmt.Fprintf(&b, "| pages without a meta description | %d |\n", t.MissingDescription)
	fmt.Fprintf(&b, "| pages sharing their title with another | %d |\n", t.DuplicateTitle)
	fmt.Fprintf(&b, "| broken links | %d |\n", t.BrokenLinks)
	fmt.Fprintf(&b, "| images without alt text | %d |\n", t.ImagesWithoutAlt)
	if len(r.Suggestions) > 0 {
		b.WriteString("\n## Suggested titles\n\n| page | title |\n|---|---|\n")
		for _, s := range r.Suggestions {
			fmt.Fprintf(&b, "| %s | %s |\n", s.URL, strings.ReplaceAll(s.Title, "|", `\|`))
		}
	}
	if len(r.DuplicateTitles) > 0 {
		b.WriteString("\n## Duplicate titles\n\n")
		for _, d := range r.DuplicateTitles {
			fmt.Fprintf(&b, "- %q: %s\n", d.Title, strings.Join(d.Pages, ", "))
		}
	}
	if len(r.BrokenLinks) > 0 {
		b.WriteString("\n## Broken links\n\n")
		for _, l := range r.BrokenLinks {
			fmt.Fprintf(&b, "- %s links to %s\n", l.Page, l.Target)
		}
	}
	list := func(head string, pages []string) {
		if len(pages) == 0 {
			return
		}
		b.WriteString("\n## " + head + "\n\n")
		for _, p := range pages {
			b.WriteString("- " + p + "\n")
		}
	}
	list("Pages without a title", r.MissingTitle)
	list("Pages without a meta description", r.MissingDesc)
	if len(r.ImagesWithout) > 0 {
		b.WriteString("\n## Images without alt text\n\n")
		for _, p := range r.ImagesWithout {
			fmt.Fprintf(&b, "- %s: %d\n", p.Page, p.Count)
		}
	}
	return b.String()
}

func report(ctx reporter, in Input) (Output, error) {
	r := build(in)
	for _, d := range r.DuplicateTitles { // one note per shared title
		if err := ctx.Note(sdk.NoteFinding, fmt.Sprintf("duplicate_title: %d pages have the title %q: %s", len(d.Pages), d.Title, strings.Join(d.Pages, ", "))); err != nil {
			return Output{}, err
		}
	}
	if r.Totals.DuplicateTitle > 0 {
		if err := ctx.Count("duplicate_title", int64(r.Totals.DuplicateTitle)); err != nil {
			return Output{}, err
		}
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return Output{}, err
	}
	jref, err := ctx.PutArtifact("report.json", "application/json", append(js, '\n'))
	if err != nil {
		return Output{}, fmt.Errorf("keeping report.json: %w", err)
	}
	mref, err := ctx.PutArtifact("report.md", "text/markdown", []byte(markdown(r)))
	if err != nil {
		return Output{}, fmt.Errorf("keeping report.md: %w", err)
	}
	return Output{Markdown: mref.Ref, JSON: jref.Ref, Totals: r.Totals}, nil
}

func main() {
	sdk.Run(func(ctx *sdk.Context, in Input) (Output, error) { return report(ctx, in) })
}
