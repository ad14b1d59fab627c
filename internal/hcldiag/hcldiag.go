// Package hcldiag renders HCL diagnostics the way every lhengine file
// format reports them (task files, policy files, eval sets): for each, a
// first line "file:line:col: severity: summary", the form editors and CI
// logs link to, then HCL's rendering: an excerpt of the source with the
// subject marked, and the detail.
package hcldiag

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Write renders diags to w, the detail wrapped to width columns (0: no
// wrapping); color adds terminal colors. files maps a filename, as it
// appears in the diagnostics' ranges, to its source; a diagnostic whose
// file is not in files, or is not UTF-8, is written without an excerpt.
// parseable says whether a source may be given to HCL's parser (one that
// is too large or nested too deep could overflow its stack); a file that
// may not, or does not parse, still gets an excerpt.
func Write(w io.Writer, files map[string][]byte, diags hcl.Diagnostics, width uint, color bool, parseable func(name string, src []byte) bool) error {
	hclFiles := make(map[string]*hcl.File, len(files))
	for name, src := range files {
		if !utf8.Valid(src) {
			// HCL's excerpt of a long line that is not UTF-8 allocates
			// for minutes; such a file is named without an excerpt.
			continue
		}
		// Parsing gives the writer the file's structure, so that it can say
		// which block an excerpt is in.
		var f *hcl.File
		if parseable(name, src) {
			f, _ = hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		}
		if f == nil {
			f = &hcl.File{}
		}
		f.Bytes = src
		hclFiles[name] = f
	}
	var buf bytes.Buffer
	dw := hcl.NewDiagnosticTextWriter(&buf, hclFiles, width, color)
	for _, d := range diags {
		buf.Reset()
		if err := dw.WriteDiagnostic(d); err != nil {
			return err
		}
		out := buf.Bytes()
		if d.Subject != nil {
			// Replace HCL's "Error: summary" line with one that starts with
			// the position, keeping the excerpt and detail that follow.
			sev := "error"
			if d.Severity == hcl.DiagWarning {
				sev = "warning"
			}
			if i := bytes.IndexByte(out, '\n'); i >= 0 {
				out = out[i+1:]
			}
			if _, err := fmt.Fprintf(w, "%s:%d:%d: %s: %s\n", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, sev, d.Summary); err != nil {
				return err
			}
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
	return nil
}
