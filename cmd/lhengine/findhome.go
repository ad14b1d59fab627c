package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// homeDir is the folder name a home has when it is found rather than
// named.
const homeDir = ".lhengine"

// findHome chooses the home as git finds its repository: the nearest
// folder named .lhengine in cwd or a parent; else $LHENGINE_HOME (env);
// else a per-user default in the user's data directory (dataDir:
// $XDG_DATA_HOME, or ~/.local/share). It returns the home and why it was
// chosen.
func findHome(cwd, env, dataDir string) (home, why string) {
	for dir := cwd; ; {
		p := filepath.Join(dir, homeDir)
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

// userDataDir is $XDG_DATA_HOME, else ~/.local/share.
func userDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share")
	}
	return os.TempDir()
}

// chooseHome sets a.home from --home, or finds it (findHome).
func (a *app) chooseHome(cmd *cobra.Command) {
	if cmd.Flags().Changed("home") {
		a.homeWhy = "--home"
		return
	}
	cwd, err := os.Getwd()
	if err != nil {
		cwd = "."
	}
	a.home, a.homeWhy = findHome(cwd, os.Getenv("LHENGINE_HOME"), userDataDir())
}

func (a *app) homeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "home",
		Short: "Which home this command would use, and why",
		Long: `home prints the home commands use here, and why: --home when given; else the
nearest folder named .lhengine in the current folder or a parent (as git
finds its repository); else $LHENGINE_HOME; else the per-user default,
lhengine in the user's data directory ($XDG_DATA_HOME, or ~/.local/share).
It also says whether a store is there yet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			abs, err := filepath.Abs(a.home)
			if err != nil {
				abs = a.home
			}
			_, err = os.Stat(filepath.Join(abs, "store"))
			exists := err == nil
			if a.json() {
				return a.printJSON(struct {
					Home   string `json:"home"`
					Why    string `json:"why"`
					Exists bool   `json:"exists"`
				}{abs, a.homeWhy, exists})
			}
			state := "holds a store"
			if !exists {
				state = "no store yet: the first run or submit creates it"
			}
			fmt.Fprintf(a.stdout, "%s\n  chosen: %s\n  %s\n", abs, a.homeWhy, state)
			return nil
		},
	}
}
