// Package plugins holds what `lhengine plugin new` writes: a template
// plugin project per language and the SDK it builds with, embedded in the
// lhengine binary so that the SDK a new project gets is the one of the ABI
// the binary speaks, and nothing has to be published anywhere.
//
// The C header, the Rust crate and the AssemblyScript SDK are embedded from
// their folders under sdk/. The Go SDK is a module of its own
// (sdk/go/go.mod), which go:embed cannot reach from this module, so
// templates/go/_sdk holds a copy of its source, refreshed by `go generate`
// and checked against it by TestGoSDKCopyIsCurrent.
package plugins

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
)

//go:generate mkdir -p templates/go/_sdk/abi
//go:generate cp sdk/go/sdk.go sdk/go/envelope.go sdk/go/capability.go sdk/go/model.go sdk/go/policy.go sdk/go/host_wasip1.go sdk/go/host_other.go sdk/go/reuse_tested.go sdk/go/reuse_untested.go templates/go/_sdk/
//go:generate cp sdk/go/abi/abi.go templates/go/_sdk/abi/

//go:embed all:templates sdk/c/lhengine.h sdk/rust/*.rs sdk/assemblyscript/assembly/*.ts
var files embed.FS

// languages are the languages a project can be written in, in the order
// the help lists them.
var languages = []string{"go", "c", "rust", "assemblyscript"}

// Languages returns the languages a project can be written in.
func Languages() []string { return append([]string(nil), languages...) }

// sdkGoVersion is the go directive of the Go SDK's go.mod, which the copy
// does not carry (a go.mod would make it a module go:embed cannot reach).
const sdkGoVersion = "1.22"

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// CheckName returns an error unless name is a safe plugin name: a lower
// case letter, then up to 63 lower case letters, digits, '_' or '-'. The
// name becomes a file name, a module or crate name and a step name.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("plugin name %q: use a lower case letter, then lower case letters, digits, '_' or '-' (at most 64 characters)", name)
	}
	return nil
}

// File is one file of a project: a slash-separated path relative to the
// project's folder, and its content.
type File struct {
	Path string
	Data []byte
}

// Project returns the files of a new plugin project name in lang (one of
// Languages()): its source, a Makefile whose default target builds
// NAME.wasm, a README, a task.hcl that runs it, and the SDK, sorted by
// path.
func Project(name, lang string) ([]File, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	var out []File
	tmplRoot := "templates/" + lang
	if _, err := fs.Stat(files, tmplRoot); err != nil || !isLanguage(lang) {
		return nil, fmt.Errorf("unknown language %q (one of %s)", lang, strings.Join(languages, ", "))
	}
	err := fs.WalkDir(files, tmplRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, tmplRoot+"/")
		if strings.HasPrefix(rel, "_sdk/") {
			// The Go SDK's copy goes in verbatim.
			out = append(out, File{Path: "lhengine-sdk/" + strings.TrimPrefix(rel, "_sdk/"), Data: b})
			return nil
		}
		rel = strings.TrimSuffix(rel, ".tmpl")
		out = append(out, File{Path: rel, Data: []byte(expand(string(b), name, lang))})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sdk, err := sdkFiles(lang)
	if err != nil {
		return nil, err
	}
	out = append(out, sdk...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// sdkFiles returns the SDK a project in lang builds with, at the paths its
// Makefile expects.
func sdkFiles(lang string) ([]File, error) {
	var out []File
	add := func(pattern, dir string) error {
		ms, err := fs.Glob(files, pattern)
		if err != nil {
			return err
		}
		for _, m := range ms {
			b, err := files.ReadFile(m)
			if err != nil {
				return err
			}
			out = append(out, File{Path: dir + "/" + path.Base(m), Data: b})
		}
		return nil
	}
	switch lang {
	case "go":
		out = append(out, File{Path: "lhengine-sdk/go.mod",
			Data: []byte("module github.com/lhengine/lhengine/plugins/sdk/go\n\ngo " + sdkGoVersion + "\n")})
	case "c":
		return out, add("sdk/c/lhengine.h", "lhengine-sdk")
	case "rust":
		return out, add("sdk/rust/*.rs", "lhengine-sdk")
	case "assemblyscript":
		return out, add("sdk/assemblyscript/assembly/*.ts", "lhengine-sdk/assembly")
	}
	return out, nil
}

func isLanguage(lang string) bool {
	for _, l := range languages {
		if l == lang {
			return true
		}
	}
	return false
}

// expand replaces __NAME__ and __LANG__ in a template.
func expand(s, name, lang string) string {
	return strings.NewReplacer("__NAME__", name, "__LANG__", lang).Replace(s)
}
