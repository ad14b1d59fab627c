package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/lhengine/lhengine/engine/internal/hostcall"
	"github.com/lhengine/lhengine/engine/internal/plan"
	"github.com/lhengine/lhengine/engine/internal/taskfile"
	"github.com/lhengine/lhengine/ledger"
)

// Remote submission (specs/api.md, "Uploads"). A client of a server on
// another machine reads its submission itself, through a recording of
// every file it reads (Prepare): the task file, its plugins, prompts, the
// policy files of its search path and the replay set's recordings. It
// uploads their contents, content-addressed, sending only those the server
// does not hold (Missing, Upload), then submits a Bundle: which path held
// which content. The server reads the submission again from that content
// alone (SubmitBundle): a path the bundle does not name is missing, and no
// path of the bundle is ever opened on the server's disk.
//
// Mount sources and the files of file_sha256 and git_head facts are not
// part of a bundle: they name the disk of the machine that runs the task,
// the server's, and are read there.

// Bundle is a submission read on a client: every file it read, by its
// absolute path on the client, with the sha256 and size of its content,
// and the folders it listed.
type Bundle struct {
	// Task is the task file's path.
	Task string
	// Home is the client's home: Home/policies is the last folder of the
	// policy search path, as it is for a local submission. "" for none.
	Home string
	// Files are the files read, by path.
	Files map[string]BundleFile
	// Dirs are the folders listed (policy folders, the replay folder);
	// one not named here does not exist for the submission.
	Dirs []string
}

// BundleFile is the content a bundle's path held.
type BundleFile struct {
	SHA256 string // lower-case hex
	Size   int64
}

// Bounds of an upload.
const (
	// MaxUploadBytes bounds one uploaded file.
	MaxUploadBytes = 256 << 20
	// MaxBundleFiles bounds the files, and the folders, of a bundle.
	MaxBundleFiles = 4096
)

// ErrBadUpload: an upload or a bundle was refused (its content did not
// have the sha256 it was sent under, it was too large, or a bundle named
// content never uploaded or a path that is not absolute). The error says
// which.
var ErrBadUpload = errors.New("bad upload")

// Check says what is wrong with b, if anything, without reading content:
// paths absolute and clean, sums of 64 lower-case hex digits, sizes within
// MaxUploadBytes, the task file among the files, the counts bounded.
func (b *Bundle) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadUpload, fmt.Sprintf(format, args...))
	}
	if len(b.Files) > MaxBundleFiles || len(b.Dirs) > MaxBundleFiles {
		return bad("a bundle names at most %d files and %d folders", MaxBundleFiles, MaxBundleFiles)
	}
	if err := checkPath(b.Task); err != nil {
		return bad("task: %v", err)
	}
	if _, ok := b.Files[b.Task]; !ok {
		return bad("the task file %s is not among the bundle's files", b.Task)
	}
	if b.Home != "" {
		if err := checkPath(b.Home); err != nil {
			return bad("home: %v", err)
		}
	}
	for p, f := range b.Files {
		if err := checkPath(p); err != nil {
			return bad("file: %v", err)
		}
		if !IsSHA256(f.SHA256) {
			return bad("file %s: sha256 %q is not 64 lower-case hex digits", p, f.SHA256)
		}
		if f.Size < 0 || f.Size > MaxUploadBytes {
			return bad("file %s: size %d is not between 0 and %d", p, f.Size, MaxUploadBytes)
		}
	}
	for _, d := range b.Dirs {
		if err := checkPath(d); err != nil {
			return bad("folder: %v", err)
		}
	}
	return nil
}

// checkPath: p is an absolute, clean path.
func checkPath(p string) error {
	if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("%q is not an absolute, clean path", p)
	}
	return nil
}

// IsSHA256 says whether s is a sha256 as uploads name content: 64
// lower-case hex digits.
func IsSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Prepared is a submission read on this machine for a server: its bundle,
// and the content of every file it names.
type Prepared struct {
	Bundle Bundle
	// PolicyDirs and ModelReplay are the submission's, made absolute: the
	// paths the bundle knows them by.
	PolicyDirs  []string
	ModelReplay string
	content     map[string][]byte // by sha256
}

// Content is the content whose sha256 is sum, if the bundle holds it.
func (p *Prepared) Content(sum string) ([]byte, bool) {
	b, ok := p.content[sum]
	return b, ok
}

// Sums are the distinct sha256 sums of the bundle's files, sorted.
func (p *Prepared) Sums() []string {
	sums := make([]string, 0, len(p.content))
	for s := range p.content {
		sums = append(sums, s)
	}
	sort.Strings(sums)
	return sums
}

// Prepare reads and validates the task file at path, with o, on this
// machine, as Submit would (without compiling its plugins: they are
// decoded, as validate does), recording every file it reads, for a
// submission to a server on another machine. home is this machine's
// home: home/policies ends the policy search path ("" for none).
// o.PolicyDirs and o.ModelReplay are made absolute. A task file that
// does not validate gives an *InvalidTaskError with its diagnostics, as
// Submit does. Mount sources are not checked: they name the server's
// disk.
func Prepare(ctx context.Context, path, home string, o SubmitOptions) (*Prepared, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	rec := &readRecorder{from: taskfile.OSFiles{}, files: map[string]BundleFile{}, content: map[string][]byte{}}
	dirs := make([]string, len(o.PolicyDirs))
	for i, d := range o.PolicyDirs {
		if dirs[i], err = filepath.Abs(d); err != nil {
			return nil, err
		}
	}
	if home != "" {
		if home, err = filepath.Abs(home); err != nil {
			return nil, err
		}
	}
	_, err = plan.PrepareWith(ctx, abs, o.Vars, plan.PolicyOptions{
		Add: o.Policies, Without: o.Without, Dirs: dirs, Home: home, Grant: o.GrantPolicies, Files: rec,
	}, plan.InspectFrom(rec))
	var inv *plan.InvalidTaskError
	if errors.As(err, &inv) {
		return nil, &InvalidTaskError{Diagnostics: &Diagnostics{diags: inv.Diagnostics, files: inv.Files}}
	}
	if err != nil {
		return nil, err
	}
	replay := ""
	if o.ModelReplay != "" {
		if replay, err = filepath.Abs(o.ModelReplay); err != nil {
			return nil, err
		}
		if _, err := hostcall.ReadReplayFrom(rec, replay); err != nil {
			return nil, err
		}
	}
	p := &Prepared{Bundle: Bundle{Task: abs, Home: home, Files: rec.files}, content: rec.content,
		PolicyDirs: dirs, ModelReplay: replay}
	for d := range rec.dirs {
		p.Bundle.Dirs = append(p.Bundle.Dirs, d)
	}
	sort.Strings(p.Bundle.Dirs)
	return p, nil
}

// readRecorder reads through from and notes every file read, with its
// content and sha256, and every folder listed. Safe for concurrent use
// (plugins are checked in parallel).
type readRecorder struct {
	from taskfile.Files

	mu      sync.Mutex
	files   map[string]BundleFile
	dirs    map[string]bool
	content map[string][]byte
}

func (r *readRecorder) Open(path string) (io.ReadCloser, error) {
	f, err := r.from.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxUploadBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxUploadBytes {
		return nil, fmt.Errorf("%s: %w: more than %d bytes, the most a server takes for one file", path, taskfile.ErrTooLarge, MaxUploadBytes)
	}
	s := sha256.Sum256(b)
	sum := hex.EncodeToString(s[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.files[path]; ok && prev.SHA256 != sum {
		return nil, fmt.Errorf("%s changed while the submission was read; submit again", path)
	}
	r.files[path] = BundleFile{SHA256: sum, Size: int64(len(b))}
	r.content[sum] = b
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (r *readRecorder) ReadDir(path string) ([]fs.DirEntry, error) {
	entries, err := r.from.ReadDir(path)
	if err == nil {
		r.mu.Lock()
		if r.dirs == nil {
			r.dirs = map[string]bool{}
		}
		r.dirs[path] = true
		r.mu.Unlock()
	}
	return entries, err
}

// ChecksMounts: mount sources name the server's disk.
func (r *readRecorder) ChecksMounts() bool { return false }

// uploads is the folder uploaded content is kept in, by sha256.
func (e *Engine) uploads() string { return filepath.Join(e.home, "uploads") }

// Missing returns those of sums this engine holds no content for, in the
// order given: neither uploaded nor a module in the store.
func (e *Engine) Missing(sums []string) ([]string, error) {
	var out []string
	for _, s := range sums {
		if !IsSHA256(s) {
			return nil, fmt.Errorf("%w: sha256 %q is not 64 lower-case hex digits", ErrBadUpload, s)
		}
		_, err := e.held(s)
		if errors.Is(err, fs.ErrNotExist) {
			out = append(out, s)
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// held reads the content this engine holds with sha256 sum: uploaded, or
// a module in the store. An error wrapping fs.ErrNotExist when it holds
// none; the content read is checked against sum.
func (e *Engine) held(sum string) ([]byte, error) {
	b, err := taskfile.ReadRegular(filepath.Join(e.uploads(), sum), MaxUploadBytes)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = e.store.Module(sum)
		if errors.Is(err, ledger.ErrNotFound) {
			return nil, fmt.Errorf("content sha256 %s: %w", sum, fs.ErrNotExist)
		}
	}
	if err != nil {
		return nil, err
	}
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != sum {
		return nil, fmt.Errorf("the content kept for sha256 %s does not have it (damaged on disk)", sum)
	}
	return b, nil
}

// Upload keeps the content read from r under its sha256, sum, in
// HOME/uploads: written to a temporary file, synced, checked, then
// renamed into place, so a crash or a wrong sum leaves nothing behind.
// Content of more than MaxUploadBytes, or whose sha256 is not sum, is
// refused with ErrBadUpload. Content held already is read and checked
// all the same, and kept as it was.
func (e *Engine) Upload(sum string, r io.Reader) error {
	if !IsSHA256(sum) {
		return fmt.Errorf("%w: sha256 %q is not 64 lower-case hex digits", ErrBadUpload, sum)
	}
	dir := e.uploads()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // nothing once renamed
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, MaxUploadBytes+1))
	if err != nil {
		return err
	}
	if n > MaxUploadBytes {
		return fmt.Errorf("%w: more than %d bytes", ErrBadUpload, MaxUploadBytes)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%w: the content sent has sha256 %s, not %s", ErrBadUpload, got, sum)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, sum))
}

// SubmitBundle submits the bundle b, uploaded before (Upload), as Submit
// submits a task file: every file of the submission is read from the
// content b names, and nothing else. A path b does not name does not
// exist for the submission, and the diagnostics say so; no path of b is
// opened on this machine's disk. A bundle naming content this engine
// does not hold is refused with ErrBadUpload, naming the path.
func (e *Engine) SubmitBundle(ctx context.Context, b Bundle, o SubmitOptions) (*ledger.Task, bool, error) {
	if err := b.Check(); err != nil {
		return nil, false, err
	}
	paths := make([]string, 0, len(b.Files))
	for p := range b.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := b.Files[p]
		c, err := e.held(f.SHA256)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, false, fmt.Errorf("%w: %s (sha256 %s) was never uploaded; upload its content first (PUT /v1/uploads/%s)", ErrBadUpload, p, f.SHA256, f.SHA256)
		case err != nil:
			return nil, false, err
		case int64(len(c)) != f.Size:
			return nil, false, fmt.Errorf("%w: %s is %d bytes in the bundle, but its content (sha256 %s) is %d", ErrBadUpload, p, f.Size, f.SHA256, len(c))
		}
	}
	bf := &bundleFiles{e: e, b: b, dirs: b.Dirs}
	return e.submit(ctx, b.Task, b.Home, bf, o)
}

// bundleFiles serves a bundle's paths from the content this engine holds,
// and nothing else.
type bundleFiles struct {
	e    *Engine
	b    Bundle
	dirs []string
}

// notUploaded: a path a bundle does not name. A folder not listed does
// not exist (a policy folder that is not there is skipped, as on a disk);
// a file not named is an error of its own, so that no diagnostic says it
// is missing from a disk that was never looked at.
type notUploaded struct{ folder bool }

func (e notUploaded) Error() string {
	return "not among the files the client uploaded (a remote submission reads nothing else)"
}
func (e notUploaded) Is(target error) bool { return e.folder && target == fs.ErrNotExist }

func (f *bundleFiles) Open(path string) (io.ReadCloser, error) {
	bf, ok := f.b.Files[path]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: notUploaded{}}
	}
	b, err := f.e.held(bf.SHA256)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (f *bundleFiles) ReadDir(dir string) ([]fs.DirEntry, error) {
	if !slices.Contains(f.dirs, dir) {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: notUploaded{folder: true}}
	}
	var out []fs.DirEntry
	for p, bf := range f.b.Files {
		if filepath.Dir(p) == dir {
			out = append(out, bundleEntry{name: filepath.Base(p), size: bf.Size})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// bundleEntry is a regular file of a bundle, as a folder listing shows it.
type bundleEntry struct {
	name string
	size int64
}

func (d bundleEntry) Name() string               { return d.name }
func (d bundleEntry) IsDir() bool                { return false }
func (d bundleEntry) Type() fs.FileMode          { return 0 }
func (d bundleEntry) Info() (fs.FileInfo, error) { return d, nil }
func (d bundleEntry) Size() int64                { return d.size }
func (d bundleEntry) Mode() fs.FileMode          { return 0o444 }
func (d bundleEntry) ModTime() time.Time         { return time.Time{} }
func (d bundleEntry) Sys() any                   { return nil }
