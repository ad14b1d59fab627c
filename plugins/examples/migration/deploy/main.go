// Command deploy is the deploy-config step of the migration example: it
// sets one key of the repository's deploy configuration (a YAML file, read
// from the mount at /mnt/repo) and writes the new file to the task's
// workspace, but only once a person approved the change: it asks through
// approval.request with the diff as the subject, and its output records
// the decision (the approval's id, who decided and their note).
//
//	GOOS=wasip1 GOARCH=wasm go build -o deploy.wasm ./plugins/examples/migration/deploy
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
	File  string `json:"file"`  // relative to the repository
	Key   string `json:"key"`   // the YAML key to set, at any depth
	Value string `json:"value"` // its new value, written as a quoted string
}

// subject is what the person decides on.
type subject struct {
	File string `json:"file"`
	Diff string `json:"diff"`
}

// approval is the decision the change was made on.
type approval struct {
	ID        string `json:"id"`
	Decision  string `json:"decision"`
	DecidedBy string `json:"decided_by"`
	Note      string `json:"note"`
}

type output struct {
	File     string   `json:"file"`
	Diff     string   `json:"diff"`
	Approval approval `json:"approval"`
	Config   string   `json:"config"` // the new file
	SHA256   string   `json:"sha256"` // of Config
}

func main() {
	sdk.Run(deploy)
}

func deploy(ctx *sdk.Context, in input) (output, error) {
	if !fs.ValidPath(in.File) || in.File == "." || in.Key == "" || in.Value == "" {
		return output{}, errors.New(`input: want "file" (a path inside the repository), "key" and "value"`)
	}
	old, err := os.ReadFile(path.Join("/mnt/repo", in.File))
	if err != nil {
		return output{}, fmt.Errorf("reading %s: %w", in.File, err)
	}
	config, diff, err := set(string(old), in.File, in.Key, in.Value)
	if err != nil {
		return output{}, err
	}
	d, err := ctx.RequestApproval(sdk.ApprovalRequest{
		Prompt:  fmt.Sprintf("Set %s to %q in %s?", in.Key, in.Value, in.File),
		Subject: subject{File: in.File, Diff: diff},
	})
	if sdk.IsPaused(err) {
		return output{}, err // the unit waits for the decision; this step runs again then
	}
	if err != nil {
		return output{}, fmt.Errorf("asking for approval: %w", err)
	}
	if !d.Approved() {
		return output{}, fmt.Errorf("the change to %s was not approved (approval %s %s by %s): %s", in.File, d.Approval, d.Decision, d.By, d.Note)
	}
	dst := path.Join("/workspace", in.File)
	if err := os.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return output{}, fmt.Errorf("writing %s: %w", in.File, err)
	}
	if err := os.WriteFile(dst, []byte(config), 0o644); err != nil {
		return output{}, fmt.Errorf("writing %s: %w", in.File, err)
	}
	sum := sha256.Sum256([]byte(config))
	ctx.Logf(sdk.LevelInfo, "%s changed, approval %s by %s", in.File, d.Approval, d.By)
	return output{
		File:     in.File,
		Diff:     diff,
		Approval: approval{ID: d.Approval, Decision: d.Decision, DecidedBy: d.By, Note: d.Note},
		Config:   config,
		SHA256:   hex.EncodeToString(sum[:]),
	}, nil
}

// set returns text with the line "KEY: ..." changed to KEY: "VALUE" (its
// indentation kept) and the change as a unified diff of that line. The key
// must be on exactly one line.
func set(text, file, key, value string) (string, string, error) {
	lines := strings.SplitAfter(text, "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " "), key+":") {
			if at >= 0 {
				return "", "", fmt.Errorf("%s sets %s on lines %d and %d; want one", file, key, at+1, i+1)
			}
			at = i
		}
	}
	if at < 0 {
		return "", "", fmt.Errorf("%s has no line setting %s", file, key)
	}
	was := lines[at]
	indent := was[:len(was)-len(strings.TrimLeft(was, " "))]
	now := fmt.Sprintf("%s%s: %q", indent, key, value)
	if strings.HasSuffix(was, "\n") {
		now += "\n"
	}
	if now == was {
		return "", "", fmt.Errorf("%s already sets %s to %q", file, key, value)
	}
	lines[at] = now
	diff := fmt.Sprintf("--- a/%s\n+++ b/%s\n@@ -%d +%d @@\n-%s+%s", file, file, at+1, at+1, withNewline(was), withNewline(now))
	return strings.Join(lines, ""), diff, nil
}

func withNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
