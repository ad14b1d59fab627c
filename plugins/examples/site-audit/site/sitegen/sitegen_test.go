package sitegen

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestGenerateIsDeterministic(t *testing.T) {
	t.Parallel()
	a, b, c := Generate(300, 1), Generate(300, 1), Generate(300, 2)
	for i := range a.pages {
		if render(&a.pages[i], i+1) != render(&b.pages[i], i+1) {
			t.Fatalf("page %d differs between two sites of the same seed", i+1)
		}
	}
	if a.Planted() != b.Planted() {
		t.Fatalf("planted %+v and %+v from one seed", a.Planted(), b.Planted())
	}
	if a.Planted() == c.Planted() {
		t.Fatalf("seeds 1 and 2 planted the same: %+v", a.Planted())
	}
	p := a.Planted()
	for name, n := range map[string]int{"missing_title": p.MissingTitle, "missing_description": p.MissingDescription,
		"duplicate_title": p.DuplicateTitle, "broken_links": p.BrokenLinks, "images_without_alt": p.ImagesWithoutAlt,
		"fail_once": p.FailOnce, "slow": p.Slow} {
		if n == 0 {
			t.Errorf("nothing planted of %s in 300 pages", name)
		}
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	s := Generate(300, 1)
	s.delay = 0
	srv := httptest.NewServer(s)
	defer srv.Close()
	get := func(method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("GET", "/sitemap.xml")
	if code != 200 || strings.Count(body, "<loc>") != 300 || !strings.Contains(body, "<loc>"+srv.URL+"/pages/300.html</loc>") {
		t.Fatalf("sitemap: %d\n%s", code, body)
	}
	fails := 0
	for i := range s.pages {
		if s.pages[i].failOnce {
			fails++
			path := "/pages/" + strconv.Itoa(i+1) + ".html"
			if code, _ := get("HEAD", path); code != 200 {
				t.Errorf("HEAD %s: %d, want 200 (HEAD never fails)", path, code)
			}
			if code, _ := get("GET", path); code != 500 {
				t.Errorf("first GET %s: %d, want 500", path, code)
			}
			if code, _ := get("GET", path); code != 200 {
				t.Errorf("second GET %s: %d, want 200", path, code)
			}
		}
	}
	if fails == 0 {
		t.Fatal("no page fails once in 300 pages")
	}
	for _, path := range []string{"/pages/0.html", "/pages/301.html", "/pages/01.html", "/pages/gone-3.html", "/nothing"} {
		if code, _ := get("GET", path); code != 404 {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
	if code, _ := get("POST", "/pages/1.html"); code != 405 {
		t.Errorf("POST: %d, want 405", code)
	}
	st := s.Stats()
	if st.Writes != 1 || st.Failed500 != int64(fails) {
		t.Errorf("stats %+v: want 1 write and %d 500s", st, fails)
	}
	if code, body := get("GET", "/planted.json"); code != 200 || !strings.Contains(body, `"missing_title": `) {
		t.Errorf("planted.json: %d %s", code, body)
	}
}
