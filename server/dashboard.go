package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/ledger"
)

// The web dashboard: server-rendered pages (html/template, which escapes
// every value: task names, step names, outputs and notes come from users
// and plugins), a stylesheet inlined in each page and one hand-written
// script that follows the API's event streams. Everything is embedded:
// the dashboard loads nothing from anywhere but its own server.
//
// Its buttons are HTML forms posted to dashboard routes, which call the
// API's own handlers in the same process (act): a button does exactly what
// the CLI does, with the same checks and errors. Posts must come from the
// dashboard's own origin (http.CrossOriginProtection).

//go:embed web
var webFS embed.FS

var (
	pages = template.Must(template.New("").Funcs(template.FuncMap{
		"when":     when,
		"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"size":     humanSize,
		"item":     func(i *int) string { return itemText(i) },
		"raw":      func(b json.RawMessage) string { return string(b) },
		"pretty":   prettyJSON,
		"shortKey": func(b json.RawMessage) string { return clip(string(b), 80) },
		"sha":      func(s string) string { return s[:min(len(s), 12)] },
	}).ParseFS(webFS, "web/*.html"))
	stylesheet = mustRead("web/dashboard.css")
	// styleHash admits the inlined stylesheet, and nothing else, in the
	// pages' Content-Security-Policy.
	styleHash = func() string {
		sum := sha256.Sum256([]byte(stylesheet))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}()
)

func mustRead(name string) string {
	b, err := webFS.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// formBodyLimit bounds the body of a dashboard form.
const formBodyLimit = 64 << 10

// loginCookie marks a browser that just posted a token to /login, so that
// the login page can say the token was refused when RequireToken sends the
// browser back to it. Any page served with a valid token clears it.
const loginCookie = "lhengine_login"

func (s *Server) dashboardRoutes() {
	m := s.mux
	m.HandleFunc("GET /{$}", s.pageList)
	m.HandleFunc("GET /tasks/{id}", s.pageTask)
	m.HandleFunc("GET /login", s.pageLogin)
	m.HandleFunc("GET /assets/dashboard.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = io.WriteString(w, script)
	})

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.pageError(w, http.StatusForbidden, "This request came from another site and was refused: the dashboard's buttons work only on its own pages.", "/")
	}))
	post := func(pattern string, h http.HandlerFunc) {
		m.Handle("POST "+pattern, cop.Handler(http.MaxBytesHandler(h, formBodyLimit)))
	}
	post("/login", s.login)
	post("/logout", s.logout)
	post("/tasks/{id}/cancel", s.act(s.cancel, func(*http.Request) any {
		return api.CancelRequest{Reason: "cancelled from the dashboard"}
	}))
	post("/tasks/{id}/resume", s.act(s.resume, func(r *http.Request) any {
		return api.ResumeRequest{Budget: strings.Fields(r.PostFormValue("budget")), By: "dashboard"}
	}))
	post("/tasks/{id}/pause", s.act(s.pause, func(r *http.Request) any {
		return api.PauseRequest{Reason: strings.TrimSpace(r.PostFormValue("reason")), By: "dashboard", Grace: "30s"}
	}))
	for verb, approve := range map[string]bool{"approve": true, "reject": false} {
		post("/tasks/{id}/approvals/{approval}/"+verb, s.act(s.decide(approve), func(r *http.Request) any {
			return api.DecideRequest{Note: strings.TrimSpace(r.PostFormValue("note")), By: "dashboard"}
		}))
	}
	post("/tasks/{id}/retry", s.act(s.retry, func(r *http.Request) any {
		return api.RetryRequest{From: r.PostFormValue("from"), By: "dashboard"}
	}))
	for verb, confirmed := range map[string]bool{"confirm": true, "retry": false} {
		post("/tasks/{id}/effects/"+verb, s.act(s.settle(confirmed), func(r *http.Request) any {
			item, _ := strconv.Atoi(r.PostFormValue("item"))
			return api.SettleRequest{Step: r.PostFormValue("step"), Item: item, Key: r.PostFormValue("key"),
				Note: strings.TrimSpace(r.PostFormValue("note"))}
		}))
	}
}

var script = mustRead("web/dashboard.js")

// ---- pages ----

// render writes the page template name with data.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		s.o.Logger.Error("dashboard page failed", "page", name, "path", r.URL.Path, "error", err)
		http.Error(w, "the page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self'; style-src "+
		styleHash+"; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if _, err := r.Cookie(loginCookie); err == nil && name != "login" {
		clearCookie(w, r, loginCookie)
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// page is what every page template gets.
type page struct {
	Title string
	CSS   template.CSS
	Owner api.Owner
	Nav   bool // show the navigation (not on the login page)
	Data  any
}

func (s *Server) page(title string, data any) page {
	return page{Title: title, CSS: template.CSS(stylesheet), Owner: s.Owner(), Nav: true, Data: data}
}

// approvalView is one approval as the pages show it.
type approvalView struct {
	ledger.Approval
	TaskName    string
	SubjectText string // the subject, pretty, clipped to pageSubject
	// Back is where the decision's form returns: "/" on the task list
	// (which also shows the task's column), "" for the task's page.
	Back string
}

func viewApproval(a ledger.Approval, taskName string) approvalView {
	return approvalView{Approval: a, TaskName: taskName, SubjectText: clip(prettyJSON(a.Subject), pageSubject)}
}

// errorPage is the page of a request the dashboard could not carry out.
type errorPage struct {
	Status  int
	Message string
	Back    string
}

func (s *Server) pageError(w http.ResponseWriter, status int, msg, back string) {
	p := s.page(http.StatusText(status), errorPage{Status: status, Message: msg, Back: back})
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, "error", p); err != nil {
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src "+styleHash+"; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// ---- login ----

type loginPage struct {
	Refused bool // a token was posted and not accepted
	// Once says why a one-time login link (oncelogin.go) did not log the
	// browser in; "" when none was used.
	Once string
}

func (s *Server) pageLogin(w http.ResponseWriter, r *http.Request) {
	if d := r.Header.Get("Sec-Fetch-Dest"); d != "" && d != "document" {
		// RequireToken sends every request without a token here, a
		// browser's request for /favicon.ico too: only a page load may
		// read (and clear) the mark of a refused login.
		http.NotFound(w, r)
		return
	}
	_, err := r.Cookie(loginCookie)
	once, _ := r.Context().Value(onceRefusedKey{}).(string)
	p := s.page("Log in", loginPage{Refused: err == nil, Once: once})
	p.Nav = false
	if err == nil {
		clearCookie(w, r, loginCookie)
	}
	s.render(w, r, http.StatusOK, "login", p)
}

// login stores the posted token in the cookie RequireToken reads, and
// sends the browser to the task list; with a wrong token RequireToken
// sends it back to the login page, which then says so.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if tok == "" {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: tok, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "1", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 60})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	clearCookie(w, r, tokenCookie)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
}

// ---- actions ----

// act is a dashboard form handler that calls the API handler h in this
// process with the JSON body body makes from the form, then sends the
// browser back to the task's page (303; the task list for a form that
// posts back=/), or shows the API's error. A request let in by a token
// acts as "NAME via dashboard": the name is who, the dashboard the way;
// without one (the home's socket) as the body's By says.
func (s *Server) act(h http.HandlerFunc, body func(*http.Request) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		back := "/tasks/" + url.PathEscape(r.PathValue("id"))
		if err := r.ParseForm(); err != nil {
			s.pageError(w, http.StatusBadRequest, "the form could not be read: "+err.Error(), back)
			return
		}
		switch b := r.PostForm.Get("back"); {
		case b == "/": // a form of the task list
			back = "/"
		case strings.HasPrefix(b, back+"?"):
			// The task page as it was shown (its event filter, its page of
			// units or events): the same page, its query read again, so
			// the redirect never leaves the task's page.
			if q, err := url.ParseQuery(strings.TrimPrefix(b, back+"?")); err == nil {
				back += "?" + q.Encode()
			}
		}
		b, err := json.Marshal(body(r))
		if err != nil {
			s.pageError(w, http.StatusInternalServerError, err.Error(), back)
			return
		}
		ctx := r.Context()
		if name, ok := ctx.Value(tokenNameKey{}).(string); ok && name != "" {
			// The dashboard says where a change came from; the token
			// still says who made it (who).
			ctx = context.WithValue(ctx, tokenNameKey{}, name+" via dashboard")
		}
		ar := r.Clone(ctx) // keeps the path values ({id}, {approval})
		ar.Body = io.NopCloser(bytes.NewReader(b))
		ar.ContentLength = int64(len(b))
		ar.Header.Set("Content-Type", "application/json")
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		h(rec, ar)
		if rec.status/100 != 2 {
			e := api.Error{Message: strings.TrimSpace(rec.body.String())}
			_ = json.Unmarshal(rec.body.Bytes(), &e)
			s.pageError(w, rec.status, e.Message, back)
			return
		}
		http.Redirect(w, r, back, http.StatusSeeOther)
	}
}

// recorder is the response of an API handler called by act.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

// ---- formatting ----

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func itemText(i *int) string {
	if i == nil {
		return ""
	}
	return strconv.Itoa(*i)
}

// prettyJSON indents a JSON value for reading, with the characters Go's
// encoder escapes for HTML (<, >, &) shown as themselves (the page's
// template escapes them); anything else is shown as it is.
func prettyJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return ""
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return string(b)
	}
	return unescapeHTML(out.String())
}

// unescapeHTML replaces the escapes \u003c, \u003e and \u0026 in JSON text
// by the characters, leaving every other escape (an escaped backslash
// before "u003c" too) as it is.
func unescapeHTML(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			switch s[i+2 : i+6] {
			case "003c", "003C":
				b.WriteByte('<')
				i += 5
				continue
			case "003e", "003E":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		b.WriteString(s[i : i+2]) // another escape, kept whole
		i++
	}
	return b.String()
}

// clip shortens s to at most n bytes (on a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
