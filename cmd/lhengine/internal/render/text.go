package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// IndentJSON is b indented, or b as it is when it is not JSON.
func IndentJSON(b []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return string(b)
	}
	return buf.String()
}

// CompactJSON is raw on one line, or raw as it is when it is not JSON.
func CompactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// Indent puts prefix before every line of s.
func Indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

// OrNone is s, or "(none)" when it is empty.
func OrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// OneLine is s on one line, cut to at most n runes with an ellipsis.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Truncate cuts s to at most n runes, with an ellipsis.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// ShortPath is p relative to the working directory when it is below it.
func ShortPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(wd, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return p
	}
	return rel
}
