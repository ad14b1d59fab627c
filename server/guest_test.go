package server_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lhengine/lhengine/internal/testwasm"
)

// dashGuestC is the guest of the dashboard test. Its input says what it does:
//
//	{"mode":"fetch","url":U}   http.fetch GET U, count a page, and (item 0)
//	                           keep the body as an artifact; output the status
//	{"mode":"effect","url":U}  effect.do an http POST to U under the key
//	                           "notify-team", then note it; output the result
//
// A failed host call ends the attempt with an error naming it.
const dashGuestC = `
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "lhengine.h"

static char out[8192];
static char req[2048];
static char errbuf[1024];

static void put_str(const char *s) {
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			printf("\\%c", c);
		} else if (c < 0x20) {
			printf("\\u%04x", c);
		} else {
			putchar(c);
		}
	}
	putchar('"');
}

static int fail(const char *call, int32_t rc) {
	int32_t n = lhengine_last_error(errbuf, (int32_t)sizeof errbuf - 1);
	if (n < 0 || n >= (int32_t)sizeof errbuf) {
		n = 0;
	}
	errbuf[n] = 0;
	snprintf(req, sizeof req, "%s: %d: %s", call, rc, errbuf);
	printf("{\"error\":");
	put_str(req);
	printf("}\n");
	return 0;
}

static int fetch(const char *env, const char *end, const char *u, const char *ue) {
	snprintf(req, sizeof req, "{\"method\":\"GET\",\"url\":%.*s,\"headers\":{}}", (int)(ue - u), u);
	int32_t got = lhengine_call_str("http.fetch", req, out, sizeof out);
	if (got < 0 || got > (int32_t)sizeof out) {
		return fail("http.fetch", got);
	}
	const char *ss, *se, *it, *ite, *xs, *xe;
	if (!member(out, out + got, "status", &ss, &se)) {
		return fail("http.fetch: no status", got);
	}
	int first = member(env, end, "item", &it, &ite) && member(it, ite, "index", &xs, &xe) && xe - xs == 1 && *xs == '0';
	if (first) {
		static const char meta[] = "{\"name\":\"front-page.html\",\"media_type\":\"text/html\"}";
		static const char page[] = "<html><body>the front page</body></html>";
		static char ref[LHENGINE_ARTIFACT_REF_MAX + 64];
		int32_t rc = lhengine_artifact_put(meta, (int32_t)strlen(meta), page, (int32_t)strlen(page), ref, sizeof ref);
		if (rc < 0) {
			return fail("artifact_put", rc);
		}
	}
	int32_t rc = lhengine_call_str("progress.count", "{\"name\":\"pages\",\"delta\":1}", errbuf, sizeof errbuf);
	if (rc < 0) {
		return fail("progress.count", rc);
	}
	printf("{\"output\":{\"status\":%.*s}}\n", (int)(se - ss), ss);
	return 0;
}

static int effect(const char *u, const char *ue) {
	snprintf(req, sizeof req,
	         "{\"key\":\"notify-team\",\"kind\":\"http\",\"request\":{\"method\":\"POST\",\"url\":%.*s,"
	         "\"headers\":{},\"body\":\"the crawl is done\"}}",
	         (int)(ue - u), u);
	int32_t got = lhengine_call_str("effect.do", req, out, sizeof out);
	if (got < 0 || got > (int32_t)sizeof out) {
		return fail("effect.do", got);
	}
	int32_t rc = lhengine_call_str("progress.note",
	                               "{\"kind\":\"finding\",\"text\":\"told the team <script>alert(1)</script>\"}",
	                               errbuf, sizeof errbuf);
	if (rc < 0) {
		return fail("progress.note", rc);
	}
	printf("{\"output\":%.*s}\n", (int)got, out);
	return 0;
}

int main(void) {
	size_t n;
	char *env = read_all(&n);
	if (!env) {
		return 1;
	}
	const char *end = env + n, *in, *ie, *u, *ue;
	if (!member(env, end, "input", &in, &ie) || !member(in, ie, "url", &u, &ue) || *u != '"') {
		puts("{\"error\":\"input.url is required\"}");
		return 0;
	}
	if (member_is(in, ie, "mode", "fetch")) {
		return fetch(env, end, u, ue);
	}
	if (member_is(in, ie, "mode", "effect")) {
		return effect(u, ue);
	}
	puts("{\"error\":\"unknown mode\"}");
	return 0;
}
`

// buildDashGuest compiles dashGuestC, with testdata/guests/c/json.h beside
// it (so the header is part of the build's cache key), and returns the path
// of the module.
func buildDashGuest(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "dashboard.c")
	if err := os.WriteFile(src, []byte(dashGuestC), 0o644); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(testwasm.ModuleRoot(t), "testdata", "guests", "c", "json.h"), filepath.Join(dir, "json.h"))
	return testwasm.BuildC(t, src)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// receiver is the loopback world of the dashboard test's guests:
//
//	/page    answers each GET when the test releases one (release)
//	/hold    answers no GET until the test ends; held reports each
//	/notify  drops every connection unanswered, so an effect sent there
//	         has no outcome; hits counts them
type receiver struct {
	release chan struct{}
	held    chan struct{}
	stop    chan struct{}

	mu   sync.Mutex
	hits int
}

func newReceiver() *receiver {
	return &receiver{release: make(chan struct{}), held: make(chan struct{}, 16), stop: make(chan struct{})}
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/page":
		select {
		case <-rv.release:
			_, _ = io.WriteString(w, "<html><body>a page</body></html>")
		case <-rv.stop:
			http.Error(w, "stopping", http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
	case "/hold":
		rv.held <- struct{}{}
		select {
		case <-rv.stop:
			http.Error(w, "stopping", http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
	case "/notify":
		rv.mu.Lock()
		rv.hits++
		rv.mu.Unlock()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	default:
		http.NotFound(w, r)
	}
}

func (rv *receiver) notified() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.hits
}
