package homefiles

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lhengine/lhengine/api"
)

// WriteOwner records o as the home's owner (api.OwnerPath), atomically.
func WriteOwner(home string, o api.Owner) error {
	path := api.OwnerPath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// OwnerStopped marks the owner record as stopped, if it is still o's.
func OwnerStopped(home string, o api.Owner, at time.Time) {
	if cur, err := ReadOwner(home); err == nil && cur.Session == o.Session {
		o.Stopped = at
		_ = WriteOwner(home, o)
	}
}

// ReadOwner reads the home's owner record.
func ReadOwner(home string) (*api.Owner, error) {
	b, err := os.ReadFile(api.OwnerPath(home))
	if err != nil {
		return nil, err
	}
	var o api.Owner
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("%s: %w", api.OwnerPath(home), err)
	}
	return &o, nil
}

// NewSession returns a new owner session id.
func NewSession() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
