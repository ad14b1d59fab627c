package homefiles

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/lhengine/lhengine/api"
)

// Named tokens: besides the home's token (api.TokenPath, named "owner"),
// a TCP listener accepts the tokens in HOME/run/tokens, one file per
// token, named by the file: "lhengine token add alice" gives a person a
// token of their own, and what they decide, pause, raise or retry over TCP
// is recorded as made by "alice". The files are written and removed by
// the CLI directly (no owner needed); serve reads them again on every
// request, so an added token works and a removed one stops working at
// once.

// OwnerToken is the name of the home's own token (api.TokenPath).
const OwnerToken = "owner"

// tokenName is what a named token may be called: it names a file, and
// it is what records say made a change.
var tokenName = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// tokensDir is where the named tokens of home live.
func tokensDir(home string) string { return filepath.Join(home, "run", "tokens") }

// NewSecret is a new token's secret: 32 random bytes, in hex.
func NewSecret() (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(raw[:]), nil
}

// Token returns the home's bearer token for TCP listeners, creating it
// (32 random bytes, hex, readable by this user only) if there is none.
func Token(home string) (string, error) {
	path := api.TokenPath(home)
	if b, err := os.ReadFile(path); err == nil {
		if tok := strings.TrimSpace(string(b)); tok != "" {
			return tok, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	tok, err := NewSecret()
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return Token(home) // created meanwhile: use that one
	}
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(tok + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return tok, err
}

// checkTokenName refuses a name a token cannot have.
func checkTokenName(name string) error {
	if name == OwnerToken {
		return fmt.Errorf("token name %q is the home's own token (%s)", name, api.TokenPath("HOME"))
	}
	if !tokenName.MatchString(name) {
		return fmt.Errorf("token name %q: use 1 to 64 of a-z, 0-9, _ and -", name)
	}
	return nil
}

// AddToken creates the named token name in home and returns its secret,
// which is stored readable by this user only (directory 0700, file 0600)
// and cannot be shown again. A name in use is refused: remove it first.
func AddToken(home, name string) (string, error) {
	if err := checkTokenName(name); err != nil {
		return "", err
	}
	dir := tokensDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	// MkdirAll keeps the mode of a directory that exists: make sure.
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", err
	}
	tok, err := NewSecret()
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("a token named %s exists: remove it first (lhengine token rm %s)", name, name)
	}
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(tok + "\n")
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return tok, nil
}

// RemoveToken removes the named token name of home: from the next request
// on, a listener refuses it.
func RemoveToken(home, name string) error {
	if err := checkTokenName(name); err != nil {
		return err
	}
	err := os.Remove(filepath.Join(tokensDir(home), name))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no token named %s (lhengine token ls lists them)", name)
	}
	return err
}

// TokenNames lists the names of home's named tokens, sorted; the home's
// own token ("owner") is not among them.
func TokenNames(home string) ([]string, error) {
	ents, err := os.ReadDir(tokensDir(home))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && tokenName.MatchString(e.Name()) && e.Name() != OwnerToken {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// Tokens returns every token a TCP listener of home accepts, name →
// secret: the home's own token as "owner" (if it exists; Token creates
// it) and each named token. A file that is not a token (a bad name, an
// empty file) is left out.
func Tokens(home string) (map[string]string, error) {
	out := map[string]string{}
	if b, err := os.ReadFile(api.TokenPath(home)); err == nil {
		if tok := strings.TrimSpace(string(b)); tok != "" {
			out[OwnerToken] = tok
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	names, err := TokenNames(home)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(tokensDir(home), n))
		if errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		if tok := strings.TrimSpace(string(b)); tok != "" {
			out[n] = tok
		}
	}
	return out, nil
}

// Match returns the name of the token in tokens whose secret is got, or
// "". It compares got with every secret, in time that depends neither on
// got nor on which one matches: the secrets' sha256 sums, of one length,
// are compared in constant time, with no early return.
func Match(tokens map[string]string, got string) string {
	sum := sha256.Sum256([]byte(got))
	name := ""
	for n, secret := range tokens {
		want := sha256.Sum256([]byte(secret))
		if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 && secret != "" {
			name = n
		}
	}
	return name
}
