package hostcall

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/lhengine/lhengine/engine/internal/guest"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
)

type fetchRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

var errRedirectDenied = errors.New("redirect to a host that is not allowed")

// fetch performs a read through http.fetch: allowed hosts only (checked
// again on every redirect), a body cap, a timeout.
func (a *Attempt) fetch(ctx context.Context, raw []byte) ([]byte, error) {
	g := a.Step.HTTP
	if g == nil {
		return nil, herr(guest.StatusDenied, "step %q may not fetch over http (declare an http block)", a.Step.Name)
	}
	var r fetchRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, herr(guest.StatusInvalid, "http.fetch wants {\"method\": \"GET\", \"url\": string, \"headers\": object}")
	}
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil, herr(guest.StatusDenied, "http.fetch is for reads (GET, HEAD); use an http effect for %s", r.Method)
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, herr(guest.StatusInvalid, "http.fetch url %q: want an absolute http(s) URL", r.URL)
	}
	if !taskfile.HostAllowed(g.Allow, hostPort(u)) {
		return nil, herr(guest.StatusDenied, "http.fetch to %s is not allowed for step %q (allow: %s)", hostPort(u), a.Step.Name, strings.Join(g.Allow, ", "))
	}
	if g.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), nil)
	if err != nil {
		return nil, herr(guest.StatusInvalid, "http.fetch: %v", err)
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	base := a.client()
	client := &http.Client{Transport: base.Transport, Timeout: base.Timeout, CheckRedirect: func(next *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if !taskfile.HostAllowed(g.Allow, hostPort(next.URL)) {
			return fmt.Errorf("%w: %s", errRedirectDenied, hostPort(next.URL))
		}
		return nil
	}}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, errRedirectDenied) {
			return nil, herr(guest.StatusDenied, "http.fetch: %v", err)
		}
		return nil, herr(guest.StatusInternal, "http.fetch: %v", err)
	}
	defer resp.Body.Close()
	max := g.MaxBytes
	if max <= 0 {
		max = 4 << 20
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, herr(guest.StatusInternal, "http.fetch: reading the body: %v", err)
	}
	if int64(len(body)) > max {
		return nil, herr(guest.StatusTooLarge, "http.fetch: the response body is larger than max_bytes (%d)", max)
	}
	out := map[string]any{"status": resp.StatusCode, "headers": firstValues(resp.Header), "url": resp.Request.URL.String()}
	if utf8.Valid(body) {
		out["body"] = string(body)
	} else {
		out["body_base64"] = base64.StdEncoding.EncodeToString(body)
	}
	return json.Marshal(out)
}
