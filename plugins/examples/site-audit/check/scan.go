package main

import (
	"html"
	"strings"
)

// page is what the audit reads from one HTML document.
type page struct {
	HasTitle         bool     // a <title> element with text
	Title            string   // its text, unescaped and trimmed
	HasDescription   bool     // <meta name="description"> with a content
	H1               string   // the text of the first <h1>
	Links            []string // the href of every <a>, in document order
	Images           int      // <img> elements
	ImagesWithoutAlt []string // the src of each <img> without an alt attribute
}

// scan reads doc with a tolerant scanner: tag and attribute names in any
// case, attribute values double-, single- or not quoted, comments,
// doctypes and the content of script and style skipped. It never fails:
// what it cannot read as a tag is text.
func scan(doc string) page {
	var p page
	sawTitle, sawH1 := false, false
	for i := 0; i < len(doc); {
		lt := strings.IndexByte(doc[i:], '<')
		if lt < 0 {
			break
		}
		i += lt
		rest := doc[i:]
		switch {
		case strings.HasPrefix(rest, "<!--"):
			end := strings.Index(rest[4:], "-->")
			if end < 0 {
				return p
			}
			i += 4 + end + 3
			continue
		case strings.HasPrefix(rest, "<!"), strings.HasPrefix(rest, "<?"), strings.HasPrefix(rest, "</"):
			end := strings.IndexByte(rest, '>')
			if end < 0 {
				return p
			}
			i += end + 1
			continue
		}
		name, attrs, n := startTag(rest)
		if n == 0 { // a '<' that starts no tag
			i++
			continue
		}
		i += n
		switch name {
		case "script", "style", "title", "h1", "textarea":
			// Raw or escapable text up to the end tag: no tags inside
			// count (an h1's inner tags are stripped from its text).
			body, m := until(doc[i:], name)
			i += m
			switch {
			case name == "title" && !sawTitle:
				sawTitle = true
				p.Title = strings.TrimSpace(html.UnescapeString(body))
				p.HasTitle = p.Title != ""
			case name == "h1" && !sawH1:
				sawH1 = true
				p.H1 = strings.Join(strings.Fields(html.UnescapeString(stripTags(body))), " ")
			}
		case "meta":
			if strings.EqualFold(strings.TrimSpace(attrs["name"]), "description") && strings.TrimSpace(attrs["content"]) != "" {
				p.HasDescription = true
			}
		case "a":
			if href, ok := attrs["href"]; ok {
				p.Links = append(p.Links, strings.TrimSpace(href))
			}
		case "img":
			p.Images++
			if _, ok := attrs["alt"]; !ok {
				p.ImagesWithoutAlt = append(p.ImagesWithoutAlt, attrs["src"])
			}
		}
	}
	return p
}

// startTag reads the start tag at the beginning of s ("<name attr=v ...>")
// and returns its lower-case name, its attributes (names lower-cased,
// values unescaped; the first of a repeated name wins) and its length; a
// length of 0 when s does not start with a tag.
func startTag(s string) (string, map[string]string, int) {
	j := 1
	for j < len(s) && isNameByte(s[j]) {
		j++
	}
	if j == 1 || !isLetter(s[1]) {
		return "", nil, 0
	}
	name := strings.ToLower(s[1:j])
	attrs := map[string]string{}
	for j < len(s) {
		for j < len(s) && (isSpace(s[j]) || s[j] == '/') {
			j++
		}
		if j >= len(s) {
			break
		}
		if s[j] == '>' {
			return name, attrs, j + 1
		}
		k := j
		for k < len(s) && !isSpace(s[k]) && s[k] != '=' && s[k] != '>' && s[k] != '/' {
			k++
		}
		if k == j { // a stray '=' or quote
			k++
		}
		attr := strings.ToLower(s[j:k])
		j = k
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		val := ""
		if j < len(s) && s[j] == '=' {
			j++
			for j < len(s) && isSpace(s[j]) {
				j++
			}
			if j < len(s) && (s[j] == '"' || s[j] == '\'') {
				q := s[j]
				end := strings.IndexByte(s[j+1:], q)
				if end < 0 {
					return name, attrs, len(s)
				}
				val = s[j+1 : j+1+end]
				j += end + 2
			} else {
				k := j
				for k < len(s) && !isSpace(s[k]) && s[k] != '>' {
					k++
				}
				val = s[j:k]
				j = k
			}
		}
		if _, dup := attrs[attr]; !dup {
			attrs[attr] = html.UnescapeString(val)
		}
	}
	return name, attrs, len(s) // a tag left open at the end of the document
}

// until returns the text of s before the end tag </name> (any case) and
// the length consumed, the end tag included; all of s when there is none.
func until(s, name string) (string, int) {
	lower := strings.ToLower(s)
	for from := 0; ; {
		k := strings.Index(lower[from:], "</"+name)
		if k < 0 {
			return s, len(s)
		}
		k += from
		after := k + 2 + len(name)
		if after < len(s) && isNameByte(s[after]) { // </h1x>: not ours
			from = after
			continue
		}
		end := strings.IndexByte(s[after:], '>')
		if end < 0 {
			return s[:k], len(s)
		}
		return s[:k], after + end + 1
	}
}

// stripTags drops everything between '<' and '>' from s.
func stripTags(s string) string {
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '<':
			in = true
		case c == '>' && in:
			in = false
		case !in:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isLetter(c byte) bool   { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isNameByte(c byte) bool { return isLetter(c) || '0' <= c && c <= '9' || c == '-' || c == ':' }
func isSpace(c byte) bool    { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
