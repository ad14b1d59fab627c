// Command check is the site-audit example's fan-out step: one unit per page
// of the sitemap. It fetches the page (a 5xx fails the attempt, so the
// step's retry absorbs a page that fails once), reads its HTML, checks
// every distinct link to the site's own pages with a HEAD request (links
// to other hosts, mailto: and the page itself are not fetched), counts
// each problem with progress.count and records one finding note per
// problem. It keeps no state between requests and never writes to the site.
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/site-audit/check.wasm ./plugins/examples/site-audit/check
package main

import (
	"fmt"
	"net/url"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Input is one page to audit and the site it belongs to.
type Input struct {
	URL  string `json:"url"`
	Site string `json:"site"` // the site's base URL: links elsewhere are not checked
}

// Output is what the audit found on one page.
type Output struct {
	URL                string   `json:"url"`
	Status             int      `json:"status"`
	Title              string   `json:"title"`
	H1                 string   `json:"h1"`
	MissingTitle       bool     `json:"missing_title"`
	MissingDescription bool     `json:"missing_description"`
	BrokenLinks        []string `json:"broken_links"` // absolute URLs that answered 404 or 410
	LinksChecked       int      `json:"links_checked"`
	ImagesWithoutAlt   int      `json:"images_without_alt"`
}

// fetcher is the part of the context check uses: http.fetch, counters and
// notes.
type fetcher interface {
	Fetch(sdk.FetchRequest) (*sdk.FetchResponse, error)
	Count(name string, delta int64) error
	Note(kind, text string) error
}

func check(ctx fetcher, in Input) (Output, error) {
	page, err := url.Parse(in.URL)
	if err != nil || page.Host == "" {
		return Output{}, fmt.Errorf("page %q is not an absolute URL", in.URL)
	}
	site, err := url.Parse(in.Site)
	if err != nil || site.Host == "" {
		return Output{}, fmt.Errorf("site %q is not an absolute URL", in.Site)
	}
	resp, err := ctx.Fetch(sdk.FetchRequest{URL: in.URL})
	if err != nil {
		return Output{}, fmt.Errorf("GET %s: %w", in.URL, err)
	}
	out := Output{URL: in.URL, Status: resp.Status, BrokenLinks: []string{}}
	if resp.Status >= 500 {
		return Output{}, fmt.Errorf("GET %s: status %d", in.URL, resp.Status)
	}
	var found []finding
	if resp.Status != 200 {
		found = append(found, finding{"unreachable_pages", fmt.Sprintf("the sitemap lists %s, which answers %d", in.URL, resp.Status)})
		return out, record(ctx, found)
	}
	body, err := resp.BodyBytes()
	if err != nil {
		return Output{}, fmt.Errorf("GET %s: %w", in.URL, err)
	}
	p := scan(string(body))
	out.Title, out.H1, out.ImagesWithoutAlt = p.Title, p.H1, len(p.ImagesWithoutAlt)
	if !p.HasTitle {
		out.MissingTitle = true
		found = append(found, finding{"missing_title", in.URL + " has no title"})
	}
	if !p.HasDescription {
		out.MissingDescription = true
		found = append(found, finding{"missing_description", in.URL + " has no meta description"})
	}
	for _, src := range p.ImagesWithoutAlt {
		found = append(found, finding{"images_without_alt", fmt.Sprintf("%s shows %q without alt text", in.URL, src)})
	}
	seen := map[string]bool{}
	for _, href := range p.Links {
		ref, err := url.Parse(href)
		if err != nil {
			continue // not a URL: nothing to fetch
		}
		target := page.ResolveReference(ref)
		target.Fragment, target.RawFragment = "", ""
		if (target.Scheme != "http" && target.Scheme != "https") || target.Host != site.Host {
			continue // elsewhere: not the site's to answer for
		}
		abs := target.String()
		if abs == in.URL || seen[abs] {
			continue
		}
		seen[abs] = true
		r, err := ctx.Fetch(sdk.FetchRequest{Method: "HEAD", URL: abs})
		if err != nil {
			return Output{}, fmt.Errorf("HEAD %s (linked from %s): %w", abs, in.URL, err)
		}
		out.LinksChecked++
		switch {
		case r.Status >= 500:
			return Output{}, fmt.Errorf("HEAD %s (linked from %s): status %d", abs, in.URL, r.Status)
		case r.Status == 404 || r.Status == 410:
			out.BrokenLinks = append(out.BrokenLinks, abs)
			found = append(found, finding{"broken_links", fmt.Sprintf("%s links to %s, which answers %d", in.URL, abs, r.Status)})
		}
	}
	return out, record(ctx, found)
}

type finding struct{ kind, text string }

// record counts every finding under its kind and notes it, and counts the
// page: all of it is kept only when the attempt succeeds.
func record(ctx fetcher, found []finding) error {
	if err := ctx.Count("pages", 1); err != nil {
		return err
	}
	for _, f := range found {
		if err := ctx.Count(f.kind, 1); err != nil {
			return err
		}
		if err := ctx.Note(sdk.NoteFinding, f.kind+": "+f.text); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	sdk.Run(func(ctx *sdk.Context, in Input) (Output, error) { return check(ctx, in) }, sdk.Stateless())
}
