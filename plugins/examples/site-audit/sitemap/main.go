// Command sitemap is the site-audit example's first step: it fetches the
// site's /sitemap.xml and outputs the URLs of its pages, in sitemap order,
// each once. URLs on other hosts are left out (a note says how many).
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/site-audit/sitemap.wasm ./plugins/examples/site-audit/sitemap
package main

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/url"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Input names the site.
type Input struct {
	Site string `json:"site"` // base URL, e.g. http://127.0.0.1:8080
}

// Output is the list of pages to audit.
type Output struct {
	Sitemap string   `json:"sitemap"`
	Pages   []string `json:"pages"`
}

type urlset struct {
	URLs []struct {
		Loc string `xml:"loc"`
	} `xml:"url"`
}

func sitemap(ctx *sdk.Context, in Input) (Output, error) {
	site, err := url.Parse(strings.TrimSuffix(in.Site, "/"))
	if err != nil || site.Host == "" || (site.Scheme != "http" && site.Scheme != "https") {
		return Output{}, fmt.Errorf("site %q is not an http(s) URL", in.Site)
	}
	loc := site.String() + "/sitemap.xml"
	resp, err := ctx.Fetch(sdk.FetchRequest{URL: loc})
	if err != nil {
		return Output{}, fmt.Errorf("GET %s: %w", loc, err)
	}
	if resp.Status != 200 {
		return Output{}, fmt.Errorf("GET %s: status %d", loc, resp.Status)
	}
	body, err := resp.BodyBytes()
	if err != nil {
		return Output{}, err
	}
	var set urlset
	if err := xml.Unmarshal(body, &set); err != nil {
		return Output{}, fmt.Errorf("reading %s: %w", loc, err)
	}
	out := Output{Sitemap: loc, Pages: []string{}}
	seen := map[string]bool{}
	elsewhere := 0
	for _, u := range set.URLs {
		l := strings.TrimSpace(u.Loc)
		p, err := url.Parse(l)
		if err != nil || p.Host != site.Host {
			elsewhere++
			continue
		}
		if !seen[l] {
			seen[l] = true
			out.Pages = append(out.Pages, l)
		}
	}
	if elsewhere > 0 {
		if err := ctx.Note(sdk.NoteFinding, fmt.Sprintf("sitemap_elsewhere: %s lists %d URLs not on %s, left out", loc, elsewhere, site.Host)); err != nil {
			return Output{}, err
		}
	}
	if len(out.Pages) == 0 {
		return Output{}, errors.New(loc + " lists no page of the site")
	}
	return out, nil
}

func main() { sdk.Run(sitemap) }
