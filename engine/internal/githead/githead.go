// Package githead reads the commit a git repository's HEAD points to, as a
// git_head environment fact does (specs/task-language.md), from the
// repository's own files: no git needs to be installed, and nothing is run.
package githead

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Read returns the commit HEAD of the git repository in dir points to:
// a work tree (dir/.git a directory, or a file "gitdir: PATH" for a linked
// work tree) or a bare repository. It reads the repository's files
// itself: HEAD, then the ref it names, loose or in packed-refs.
func Read(dir string) (string, error) {
	gitDir, err := findGitDir(dir)
	if err != nil {
		return "", err
	}
	head, err := readLine(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", fmt.Errorf("git repository %s: reading HEAD: %w", dir, err)
	}
	ref, symbolic := strings.CutPrefix(head, "ref: ")
	if !symbolic {
		return commitID(dir, head)
	}
	ref = strings.TrimSpace(ref)
	if !strings.HasPrefix(ref, "refs/") || strings.Contains(ref, "..") {
		return "", fmt.Errorf("git repository %s: HEAD names %q, which is not a ref", dir, ref)
	}
	// A linked work tree keeps its refs in the common directory.
	common := gitDir
	if c, err := readLine(filepath.Join(gitDir, "commondir")); err == nil {
		common = c
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
	}
	for _, d := range []string{gitDir, common} {
		if line, err := readLine(filepath.Join(d, filepath.FromSlash(ref))); err == nil {
			return commitID(dir, line)
		}
	}
	id, err := packedRef(filepath.Join(common, "packed-refs"), ref)
	if err != nil {
		return "", fmt.Errorf("git repository %s: %w", dir, err)
	}
	if id == "" {
		return "", fmt.Errorf("git repository %s: HEAD names %s, which has no commit yet", dir, ref)
	}
	return commitID(dir, id)
}

// findGitDir returns the git directory of the repository in dir.
func findGitDir(dir string) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("git repository %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory holding a git repository", dir)
	}
	dotGit := filepath.Join(dir, ".git")
	switch fi, err := os.Stat(dotGit); {
	case err == nil && fi.IsDir():
		return dotGit, nil
	case err == nil:
		line, err := readLine(dotGit)
		if err != nil {
			return "", fmt.Errorf("git repository %s: %w", dir, err)
		}
		p, ok := strings.CutPrefix(line, "gitdir: ")
		if !ok {
			return "", fmt.Errorf("%s is not a git directory link", dotGit)
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return p, nil
	}
	// A bare repository.
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		if fi, err := os.Stat(filepath.Join(dir, "objects")); err == nil && fi.IsDir() {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no git repository in %s (no .git)", dir)
}

// readLine reads the first line of a small file, trimmed.
func readLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return strings.TrimSpace(string(line)), nil
}

// packedRef looks ref up in a packed-refs file: its commit id, or "" when
// it is not there (or there is no such file).
func packedRef(path, ref string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref {
			return id, nil
		}
	}
	return "", sc.Err()
}

// commitID checks that s is a commit id (40 or 64 hex digits).
func commitID(dir, s string) (string, error) {
	if _, err := hex.DecodeString(s); err != nil || (len(s) != 40 && len(s) != 64) {
		return "", fmt.Errorf("git repository %s: HEAD resolves to %q, which is not a commit id", dir, s)
	}
	return strings.ToLower(s), nil
}
