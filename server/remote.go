package server

import (
	"context"
	"fmt"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
)

// UploadStats says what a remote submission sent.
type UploadStats struct {
	Files    int   // files the submission read
	Uploaded int   // contents sent (the owner held the others)
	Bytes    int64 // bytes sent
}

// SubmitRemote submits the task file req.Path, on this machine, to the
// owner c reaches over TCP (specs/api.md, "Uploads"): it reads the task
// file, its plugins, prompts, the policy files of its search path (whose
// last folder is home/policies; "" for none) and the recordings of
// req.ModelReplay here, validating them as a submission does, asks the
// owner which of their contents it lacks, uploads those alone, and
// submits the bundle that names them. A task file that does not validate
// gives an *engine.InvalidTaskError, with file:line:col, before anything
// is sent.
func SubmitRemote(ctx context.Context, c *api.Client, req api.SubmitRequest, home string) (*api.SubmitResponse, UploadStats, error) {
	var st UploadStats
	p, err := engine.Prepare(ctx, req.Path, home, engine.SubmitOptions{
		Vars: req.Vars, Policies: req.Policies, Without: req.Without, PolicyDirs: req.PolicyDirs,
		GrantPolicies: req.GrantPolicies, ModelReplay: req.ModelReplay,
	})
	if err != nil {
		return nil, st, err
	}
	st.Files = len(p.Bundle.Files)
	missing, err := c.Missing(ctx, p.Sums())
	if err != nil {
		return nil, st, fmt.Errorf("asking the server which files it holds: %w", err)
	}
	for _, sum := range missing {
		b, ok := p.Content(sum)
		if !ok {
			return nil, st, fmt.Errorf("the server asked for content sha256 %s, which the submission does not hold", sum)
		}
		if err := c.Upload(ctx, sum, b); err != nil {
			return nil, st, fmt.Errorf("uploading %s: %w", pathOf(p.Bundle, sum), err)
		}
		st.Uploaded++
		st.Bytes += int64(len(b))
	}
	b := &api.Bundle{Task: p.Bundle.Task, Home: p.Bundle.Home, Files: map[string]api.BundleFile{}, Dirs: p.Bundle.Dirs}
	for path, f := range p.Bundle.Files {
		b.Files[path] = api.BundleFile{SHA256: f.SHA256, Size: f.Size}
	}
	req.Path, req.Bundle = "", b
	req.PolicyDirs = p.PolicyDirs
	if req.ModelReplay != "" {
		req.ModelReplay = p.ModelReplay
	}
	r, err := c.Submit(ctx, req)
	return r, st, err
}

// pathOf names a file of b whose content is sum, for errors.
func pathOf(b engine.Bundle, sum string) string {
	for path, f := range b.Files {
		if f.SHA256 == sum {
			return path
		}
	}
	return "sha256 " + sum
}
