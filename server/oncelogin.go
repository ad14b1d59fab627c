package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/lhengine/lhengine/internal/homefiles"
)

// One-time login links: `lhengine serve` prints
// http://ADDR/login?once=SECRET beside the dashboard's address, so that a
// person at the terminal opens the dashboard with a click instead of
// pasting the home's token. The secret is 32 random bytes (crypto/rand),
// held in this process's memory only, never written or logged; it works
// once, within OnceLoginFor of being issued, and is exchanged for the
// session cookie /login sets (the token it stands for) with a redirect to
// the task list. A link used again, expired, or from another run of the
// server shows the login page, which says so.

// OnceLoginFor is how long a one-time login link works.
const OnceLoginFor = 15 * time.Minute

// OnceLogins holds the one-time login links of a server. Its methods are
// safe for concurrent use.
type OnceLogins struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	links []*onceLink
}

// onceLink is one issued link: the sha256 of its secret (the secret itself
// is not kept), the token it logs in with, and when it stops working.
type onceLink struct {
	sum     [sha256.Size]byte
	token   string // a token's name (homefiles.OwnerToken)
	expires time.Time
	used    bool
}

// NewOnceLogins returns an empty set of links that work for ttl each; now
// is the clock (nil: time.Now).
func NewOnceLogins(ttl time.Duration, now func() time.Time) *OnceLogins {
	if now == nil {
		now = time.Now
	}
	return &OnceLogins{ttl: ttl, now: now}
}

// Issue makes a link that logs a browser in with the token named token
// (homefiles.OwnerToken: the home's own) and returns its secret, the value
// of /login?once=.
func (o *OnceLogins) Issue(token string) (string, error) {
	secret, err := homefiles.NewSecret() // 32 bytes of crypto/rand, hex
	if err != nil {
		return "", err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	// Links past their time are only kept to say "expired" for a while.
	o.links = slices.DeleteFunc(o.links, func(l *onceLink) bool { return now.Sub(l.expires) > 24*time.Hour })
	o.links = append(o.links, &onceLink{sum: sha256.Sum256([]byte(secret)), token: token, expires: now.Add(o.ttl)})
	return secret, nil
}

// onceRefusal says why a link did not log the browser in.
type onceRefusal string

const (
	onceUsed    onceRefusal = "used"
	onceExpired onceRefusal = "expired"
	onceUnknown onceRefusal = "unknown"
)

// use spends the link whose secret is secret and returns the name of the
// token it logs in with, or why it does not. Every link is compared, in
// constant time, whatever matches.
func (o *OnceLogins) use(secret string) (string, onceRefusal) {
	sum := sha256.Sum256([]byte(secret))
	o.mu.Lock()
	defer o.mu.Unlock()
	var found *onceLink
	for _, l := range o.links {
		if subtle.ConstantTimeCompare(l.sum[:], sum[:]) == 1 {
			found = l
		}
	}
	switch {
	case found == nil:
		return "", onceUnknown
	case found.used:
		return "", onceUsed
	case !o.now().Before(found.expires):
		return "", onceExpired
	}
	found.used = true
	return found.token, ""
}

// onceRefusedKey marks, in the context of a request for the login page,
// what to say of the one-time link it carried, which was refused.
type onceRefusedKey struct{}

// Handler wraps h, the server's handler behind RequireTokens, so that
// GET /login?once=SECRET logs the browser in: a link that works sets the
// cookie /login sets, with the secret of its token read from tokens (as
// RequireTokens reads them), and redirects to the task list; one that does
// not goes on to the login page, which says why. Every other request goes
// to h unchanged.
func (o *OnceLogins) Handler(h http.Handler, tokens func() (map[string]string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/login" || (r.Method != http.MethodGet && r.Method != http.MethodHead) || !r.URL.Query().Has("once") {
			h.ServeHTTP(w, r)
			return
		}
		if d := r.Header.Get("Sec-Fetch-Dest"); d != "" && d != "document" {
			// Only a page load spends a link (not a prefetch of an image).
			http.NotFound(w, r)
			return
		}
		name, why := o.use(r.URL.Query().Get("once"))
		secret := ""
		if why == "" {
			known, err := tokens()
			if secret = known[name]; err != nil || secret == "" {
				// The token was removed (or cannot be read) since the
				// link was printed.
				why = onceUnknown
			}
		}
		if why != "" {
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), onceRefusedKey{}, onceMessage(why, o.ttl))))
			return
		}
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: secret, Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
}

// onceMessage is what the login page says about a link refused for why,
// links working for ttl.
func onceMessage(why onceRefusal, ttl time.Duration) string {
	switch why {
	case onceUsed:
		return "That login link was already used: a link printed by lhengine serve works once. Log in with a token below, or restart lhengine serve for a new link."
	case onceExpired:
		return "That login link has expired: a link printed by lhengine serve works for " + lifetime(ttl) +
			". Log in with a token below, or restart lhengine serve for a new link."
	}
	return "That login link is not known to this server (it may be from an earlier start of lhengine serve). Log in with a token below, or use the link lhengine serve printed when it started."
}

// lifetime says how long ttl is: "15 minutes".
func lifetime(ttl time.Duration) string {
	if ttl >= time.Minute && ttl%time.Minute == 0 {
		if ttl == time.Minute {
			return "1 minute"
		}
		return fmt.Sprintf("%d minutes", ttl/time.Minute)
	}
	return ttl.String()
}
