// Command check is the check step of the migration example: it verifies
// the renamed copies in the task's workspace (no use of the old name is
// left, and every bracket, brace and parenthesis is closed, outside
// strings and comments) and that the plan missed no file of the
// repository mounted at /mnt/repo. A failed check fails the step with
// every failure in its message.
//
//	GOOS=wasip1 GOARCH=wasm go build -o check.wasm ./plugins/examples/migration/check
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	Files []string `json:"files"` // the renamed files, relative to the repository
	Old   string   `json:"old"`
	Ext   string   `json:"ext"` // the files the plan looked at: names ending so
}

type output struct {
	Passed bool     `json:"passed"`
	Checks int      `json:"checks"` // checks run, all passed
	Files  []string `json:"files"`
}

func main() {
	sdk.Run(check)
}

func check(ctx *sdk.Context, in input) (output, error) {
	if in.Old == "" {
		return output{}, errors.New(`input: "old" is required`)
	}
	var failures []string
	checks := 0
	for _, f := range in.Files {
		if !fs.ValidPath(f) || f == "." {
			return output{}, fmt.Errorf("input: file %q is not a path inside the repository", f)
		}
		text, err := os.ReadFile(path.Join("/workspace", f))
		if err != nil {
			return output{}, fmt.Errorf("reading the renamed %s: %w", f, err)
		}
		checks++
		if n := bytes.Count(text, []byte(in.Old)); n > 0 {
			failures = append(failures, fmt.Sprintf("%s still uses %s %d times", f, in.Old, n))
		}
		checks++
		if err := balanced(text); err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", f, err))
		}
	}
	// The plan was made at an earlier commit: a file that uses the old
	// name now and is not in it would ship unconverted.
	checks++
	missed, err := users(in.Old, in.Ext)
	if err != nil {
		return output{}, fmt.Errorf("reading the repository: %w", err)
	}
	for _, f := range missed {
		if !slices.Contains(in.Files, f) {
			failures = append(failures, fmt.Sprintf("%s uses %s but is not in the plan", f, in.Old))
		}
	}
	if len(failures) > 0 {
		return output{}, fmt.Errorf("%d of the checks failed: %s", len(failures), strings.Join(failures, "; "))
	}
	ctx.Logf(sdk.LevelInfo, "%d checks passed on %d files", checks, len(in.Files))
	return output{Passed: true, Checks: checks, Files: in.Files}, nil
}

// users lists the files of the repository ending in ext that contain old.
func users(old, ext string) ([]string, error) {
	var files []string
	err := fs.WalkDir(os.DirFS("/mnt/repo"), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == ".git":
			return fs.SkipDir
		case !d.Type().IsRegular() || !strings.HasSuffix(p, ext):
			return nil
		}
		text, err := os.ReadFile(path.Join("/mnt/repo", p))
		if err == nil && bytes.Contains(text, []byte(old)) {
			files = append(files, p)
		}
		return err
	})
	return files, err
}

// balanced reports the first bracket of Go-like source text that is not
// closed, or closed by the wrong one, outside string, rune and raw string
// literals and comments.
func balanced(text []byte) error {
	type open struct {
		c    byte
		line int
	}
	var stack []open
	line := 1
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '\n':
			line++
		case c == '/' && i+1 < len(text) && text[i+1] == '/':
			for i < len(text) && text[i] != '\n' {
				i++
			}
			i--
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			end := bytes.Index(text[i+2:], []byte("*/"))
			if end < 0 {
				return fmt.Errorf("line %d: comment not closed", line)
			}
			line += bytes.Count(text[i:i+2+end], []byte("\n"))
			i += end + 3
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(text) && text[j] != c && text[j] != '\n' {
				if text[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(text) || text[j] != c {
				return fmt.Errorf("line %d: literal not closed", line)
			}
			i = j
		case c == '`':
			end := bytes.IndexByte(text[i+1:], '`')
			if end < 0 {
				return fmt.Errorf("line %d: raw string not closed", line)
			}
			line += bytes.Count(text[i:i+1+end], []byte("\n"))
			i += end + 1
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, open{c, line})
		case c == ')' || c == ']' || c == '}':
			want := map[byte]byte{')': '(', ']': '[', '}': '{'}[c]
			if len(stack) == 0 {
				return fmt.Errorf("line %d: %c closes nothing", line, c)
			}
			if top := stack[len(stack)-1]; top.c != want {
				return fmt.Errorf("line %d: %c closes the %c of line %d", line, c, top.c, top.line)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		top := stack[len(stack)-1]
		return fmt.Errorf("line %d: %c is never closed", top.line, top.c)
	}
	return nil
}
