package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lhengine/lhengine/plugins"
)

// pluginNewCmd is `lhengine plugin new NAME --lang LANG [--dir DIR]`: it
// writes a plugin project, with the SDK embedded in this binary, into an
// empty folder.
func (a *app) pluginNewCmd() *cobra.Command {
	var lang, dir string
	cmd := &cobra.Command{
		Use:   "new NAME --lang go|c|rust|assemblyscript [--dir DIR]",
		Short: "Write a ready plugin project: source, Makefile, README, task.hcl and the SDK",
		Long: `Write a plugin project NAME into DIR (default ./NAME), which must not
exist or be empty: the plugin's source, a Makefile whose default target
builds NAME.wasm with one "make", a README, a task.hcl that runs it
("lhengine run task.hcl") and the SDK for the language, copied from this
binary so that it speaks this binary's plugin ABI.

The plugin answers {"echo": INPUT, "lang": LANG} and shows logging, a
progress count and a note.

Toolchains: go needs Go 1.22 or later; c needs clang-14 with wasi-libc
(Debian: clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32); rust needs
rustc with the wasm32-wasi standard library, no cargo (Debian: rustc
libstd-rust-dev-wasm32); assemblyscript needs node and npm, and its make
runs npm install of pinned assemblyscript and @assemblyscript/wasi-shim.

NAME is a lower case letter, then lower case letters, digits, '_' or '-'.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := plugins.CheckName(name); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if lang == "" {
				return &exitError{code: exitUsage, err: fmt.Errorf("--lang is required: one of %s", strings.Join(plugins.Languages(), ", "))}
			}
			if err := checkLanguage(lang); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if dir == "" {
				dir = name
			}
			files, err := plugins.Project(name, lang)
			if err != nil {
				return err
			}
			if err := writeProject(dir, files); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote %s plugin %s in %s (%d files)\nbuild and run it:\n  cd %s && make && lhengine run task.hcl\n",
				lang, name, dir, len(files), dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&lang, "lang", "", "language: "+strings.Join(plugins.Languages(), ", "))
	cmd.Flags().StringVar(&dir, "dir", "", "folder to write the project into (default ./NAME); must not exist or be empty")
	return cmd
}

// checkLanguage returns nil for a known language, or an error naming the
// known ones and the closest to lang.
func checkLanguage(lang string) error {
	best, bestD := "", 1<<30
	for _, l := range plugins.Languages() {
		if l == lang {
			return nil
		}
		if d := editDistance(strings.ToLower(lang), l); d < bestD {
			best, bestD = l, d
		}
	}
	msg := fmt.Sprintf("unknown --lang %q (one of %s)", lang, strings.Join(plugins.Languages(), ", "))
	if bestD <= len(best)/2 || strings.HasPrefix(best, strings.ToLower(lang)) {
		msg += fmt.Sprintf(`; did you mean "%s"?`, best)
	}
	return errors.New(msg)
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// writeProject writes files under dir, which must not exist or be an
// empty folder. Nothing is written when it is not.
func writeProject(dir string, files []plugins.File) error {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return fmt.Errorf("%s is not empty: plugin new writes only into a new or empty folder", dir)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
