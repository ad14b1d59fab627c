// Command plan is the first step of the migration example: it lists the
// files of the repository mounted at /mnt/repo that use the old API name,
// and records the HEAD commit it planned against (the task's environment
// fact "head").
//
//	GOOS=wasip1 GOARCH=wasm go build -o plan.wasm ./plugins/examples/migration/plan
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// repo is where the step's mount "repo" is preopened.
const repo = "/mnt/repo"

type input struct {
	Old string `json:"old"` // the API name to replace
	New string `json:"new"` // its replacement
	Ext string `json:"ext"` // the files to look at: names ending so
}

type output struct {
	// Head is the commit the plan was made against.
	Head  string   `json:"head"`
	Files []string `json:"files"` // slash-separated, relative to the repository, sorted
	Uses  int      `json:"uses"`  // occurrences of Old in them
}

func main() {
	sdk.Run(plan)
}

func plan(ctx *sdk.Context, in input) (output, error) {
	if in.Old == "" || in.New == "" {
		return output{}, errors.New(`input: "old" and "new" are required`)
	}
	if strings.Contains(in.New, in.Old) {
		return output{}, fmt.Errorf("input: the new name %q contains the old one %q, so no check could tell them apart", in.New, in.Old)
	}
	head := ctx.Environment["head"]
	if head == "" {
		return output{}, errors.New(`the task declares no environment fact "head" (environment { fact "head" { git_head = "repo" } })`)
	}
	out := output{Head: head, Files: []string{}}
	err := fs.WalkDir(os.DirFS(repo), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(p, in.Ext) {
			return nil
		}
		text, err := os.ReadFile(path.Join(repo, p))
		if err != nil {
			return err
		}
		if n := bytes.Count(text, []byte(in.Old)); n > 0 {
			out.Files = append(out.Files, p)
			out.Uses += n
		}
		return nil
	})
	if err != nil {
		return output{}, fmt.Errorf("reading the repository: %w", err)
	}
	ctx.Logf(sdk.LevelInfo, "%d uses of %s in %d files at %s", out.Uses, in.Old, len(out.Files), head)
	return out, nil
}
