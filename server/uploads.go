package server

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/lhengine/lhengine/api"
	"github.com/lhengine/lhengine/engine"
)

// Uploads (specs/api.md, "Uploads"): a client on another machine sends
// the contents of its submission's files, by sha256, then submits a
// bundle naming them. The engine keeps them in HOME/uploads.

// missing answers POST /v1/uploads/missing: the contents, of those asked
// for, that the owner holds neither as an upload nor as a module.
func (s *Server) missing(w http.ResponseWriter, req *http.Request) {
	var in api.MissingRequest
	if err := readJSON(req, &in); err != nil {
		s.fail(w, req, err)
		return
	}
	if len(in.SHA256) > engine.MaxBundleFiles {
		s.fail(w, req, badRequest("at most %d sums at a time", engine.MaxBundleFiles))
		return
	}
	m, err := s.e.Missing(in.SHA256)
	if err != nil {
		s.fail(w, req, uploadError(err))
		return
	}
	writeJSON(w, http.StatusOK, api.MissingResponse{Missing: nonNil(m)})
}

// upload answers PUT /v1/uploads/{sha256}: the body, kept if its sha256
// is the path's.
func (s *Server) upload(w http.ResponseWriter, req *http.Request) {
	sum := req.PathValue("sha256")
	if !engine.IsSHA256(sum) {
		s.fail(w, req, badRequest("%q is not a sha256 (64 lower-case hex digits)", sum))
		return
	}
	if req.ContentLength > engine.MaxUploadBytes {
		s.fail(w, req, &api.Error{HTTPStatus: http.StatusRequestEntityTooLarge, Code: api.CodeInvalid,
			Message: fmt.Sprintf("an upload is at most %d bytes, not %d", engine.MaxUploadBytes, req.ContentLength)})
		return
	}
	n := &countingReader{r: http.MaxBytesReader(w, req.Body, engine.MaxUploadBytes+1)}
	if err := s.e.Upload(sum, n); err != nil {
		s.fail(w, req, uploadError(err))
		return
	}
	writeJSON(w, http.StatusCreated, api.UploadResponse{SHA256: sum, Size: n.n})
}

// uploadError makes a refused upload or bundle a bad request.
func uploadError(err error) error {
	if errors.Is(err, engine.ErrBadUpload) {
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	return err
}

// countingReader counts what it reads.
type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// submission is what a submit request asks of the engine: a path on the
// owner's disk (over the socket only) or a bundle of uploads, checked.
type submission struct {
	path   string
	bundle *engine.Bundle
}

// submissionOf reads the task a SubmitRequest names; tcp says it came over
// TCP, where a path is refused: a client there names files on its own
// machine, and the owner opens no path a client names.
func submissionOf(in *api.SubmitRequest, tcp bool) (submission, error) {
	switch {
	case in.Path != "" && in.Bundle != nil:
		return submission{}, badRequest("a submission names its task by path or by bundle, not both")
	case in.Bundle != nil:
		b := engine.Bundle{Task: in.Bundle.Task, Home: in.Bundle.Home, Files: map[string]engine.BundleFile{}, Dirs: in.Bundle.Dirs}
		for p, f := range in.Bundle.Files {
			b.Files[p] = engine.BundleFile{SHA256: f.SHA256, Size: f.Size}
		}
		if err := b.Check(); err != nil {
			return submission{}, uploadError(err)
		}
		if err := absOrEmpty(in.ModelReplay, "model_replay"); err != nil {
			return submission{}, err
		}
		for _, d := range in.PolicyDirs {
			if err := absOrEmpty(d, "policy_dirs"); err != nil {
				return submission{}, err
			}
		}
		return submission{bundle: &b}, nil
	case tcp:
		return submission{}, badRequest("over TCP a submission names no file on the server: upload the task's files and submit them as a bundle " +
			"(specs/api.md, \"Uploads\"; lhengine --server URL submit does)")
	}
	if in.Path == "" || !filepath.IsAbs(in.Path) {
		return submission{}, badRequest("path must be the absolute path of a task file on the owner's file system, not %q", in.Path)
	}
	// The owner reads the file and shows excerpts of it in diagnostics:
	// task files are .hcl files.
	if filepath.Ext(in.Path) != ".hcl" {
		return submission{}, badRequest("path %q is not a task file: task files end in .hcl", in.Path)
	}
	if err := absOrEmpty(in.ModelReplay, "model_replay"); err != nil {
		return submission{}, err
	}
	return submission{path: in.Path}, nil
}

// absOrEmpty: p, the request's field named field, is absolute or empty.
func absOrEmpty(p, field string) error {
	if p != "" && !filepath.IsAbs(p) {
		return badRequest("%s must be an absolute path, not %q", field, p)
	}
	return nil
}

// overTCP says whether req came through a TCP listener (RequireTokens let
// it in), not the home's socket.
func overTCP(req *http.Request) bool {
	_, ok := req.Context().Value(tokenNameKey{}).(string)
	return ok
}
