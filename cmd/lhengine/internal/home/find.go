package home

import (
	"os"
	"path/filepath"
)

// dirName is the folder name a home has when it is found rather than
// named.
const dirName = ".lhengine"

// Find chooses the home as git finds its repository: the nearest folder
// named .lhengine in cwd or a parent; else $LHENGINE_HOME (env); else a
// per-user default in the user's data directory (dataDir: UserDataDir).
// It returns the home and why it was chosen.
func Find(cwd, env, dataDir string) (home, why string) {
	for dir := cwd; ; {
		p := filepath.Join(dir, dirName)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			if dir == cwd {
				return p, "the .lhengine in the current folder"
			}
			return p, "the nearest .lhengine above the current folder"
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if env != "" {
		return env, "$LHENGINE_HOME (no .lhengine in the current folder or above)"
	}
	return filepath.Join(dataDir, "lhengine"), "the per-user default (no .lhengine in the current folder or above, no $LHENGINE_HOME)"
}

// UserDataDir is $XDG_DATA_HOME, else ~/.local/share.
func UserDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share")
	}
	return os.TempDir()
}
