// Command rename is the fan-out step of the migration example: for one file
// of the plan it reads the file from the repository mounted at /mnt/repo,
// replaces every use of the old API name with the new one, and writes the
// result to the same path in the task's workspace. The repository itself
// is never written.
//
//	GOOS=wasip1 GOARCH=wasm go build -o rename.wasm ./plugins/examples/migration/rename
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	File string `json:"file"` // slash-separated, relative to the repository
	Old  string `json:"old"`
	New  string `json:"new"`
}

type output struct {
	File         string `json:"file"`
	Replacements int    `json:"replacements"`
	SHA256       string `json:"sha256"` // of the new text
	Head         string `json:"head"`   // the commit the file was read at
}

func main() {
	sdk.Run(rename)
}

func rename(ctx *sdk.Context, in input) (output, error) {
	if !fs.ValidPath(in.File) || in.File == "." {
		return output{}, fmt.Errorf("input: file %q is not a path inside the repository", in.File)
	}
	if in.Old == "" {
		return output{}, errors.New(`input: "old" is required`)
	}
	text, err := os.ReadFile(path.Join("/mnt/repo", in.File))
	if err != nil {
		return output{}, fmt.Errorf("reading %s: %w", in.File, err)
	}
	n := strings.Count(string(text), in.Old)
	renamed := strings.ReplaceAll(string(text), in.Old, in.New)
	dst := path.Join("/workspace", in.File)
	if err := os.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return output{}, fmt.Errorf("writing %s: %w", in.File, err)
	}
	if err := os.WriteFile(dst, []byte(renamed), 0o644); err != nil {
		return output{}, fmt.Errorf("writing %s: %w", in.File, err)
	}
	sum := sha256.Sum256([]byte(renamed))
	ctx.Logf(sdk.LevelInfo, "%s: %d replacements", in.File, n)
	return output{File: in.File, Replacements: n, SHA256: hex.EncodeToString(sum[:]), Head: ctx.Environment["head"]}, nil
}
