package taskfile

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

var httpSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "allow", Required: true},
		{Name: "max_bytes"},
		{Name: "timeout"},
	},
}

var effectSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "hosts"},
		{Name: "mode"},
		{Name: "check_url"},
	},
}

var mountSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true},
	},
}

var (
	effectKinds = []string{EffectHTTP, EffectFile}
	effectModes = []string{EffectModeResend, EffectModeCheck, EffectModeManual}
	workspaces  = []string{WorkspaceRW, WorkspaceRO, WorkspaceNone}
)

// decodeCapabilities decodes what step s may reach: the workspace and
// host_calls attributes and the http, effect and mount blocks among blocks
// (the step's blocks; others are ignored here).
func decodeCapabilities(s *Step, attrs hcl.Attributes, blocks hcl.Blocks) hcl.Diagnostics {
	if attr, ok := attrs["workspace"]; ok {
		s.workspaceRange = attr.Expr.Range()
	}
	diags := hcldecode.Fields(attrs,
		hcldecode.Set("workspace", &s.Workspace, hcldecode.OneOf("Invalid workspace",
			`workspace must be "rw" (read-write), "ro" (read-only) or "none"`, workspaces...)),
		hcldecode.Set("host_calls", &s.HostCalls, hcldecode.AtLeast(0, "Invalid host call budget",
			"host_calls is how many host calls an attempt may make, 0 for no limit; it must not be negative; got %d.")),
	)

	diags = append(diags, decodeModelGrant(s, attrs)...)

	var httpBlock *hcl.Block
	effectBlocks := map[string]*hcl.Block{}
	mountBlocks := map[string]*hcl.Block{}
	for _, b := range blocks {
		switch b.Type {
		case "http":
			if httpBlock != nil {
				diags = append(diags, duplicateBlock(b, httpBlock))
				continue
			}
			httpBlock = b
			g, d := decodeHTTPBlock(b)
			diags = append(diags, d...)
			s.HTTP = g
			if content, _, _ := b.Body.PartialContent(httpSchema); content.Attributes["allow"] != nil {
				s.allowRange = content.Attributes["allow"].Expr.Range()
			}
		case "effect":
			kind := b.Labels[0]
			if !slices.Contains(effectKinds, kind) {
				diags = append(diags, hcldecode.LabelError(b, "Unknown effect kind", fmt.Sprintf("The effect kinds are \"http\" and \"file\"; %q is not one.%s", kind, hcldecode.DidYouMean(kind, effectKinds))))
				continue
			}
			if first, dup := effectBlocks[kind]; dup {
				diags = append(diags, hcldecode.LabelError(b, "Duplicate effect kind", fmt.Sprintf("A step has at most one effect block per kind; effect %q was already declared at %s.", kind, first.DefRange)))
				continue
			}
			effectBlocks[kind] = b
			g, d := decodeEffectBlock(b)
			diags = append(diags, d...)
			if s.Effects == nil {
				s.Effects = map[string]*EffectGrant{}
			}
			s.Effects[kind] = g
		case "mount":
			m, d := decodeMountBlock(b)
			diags = append(diags, d...)
			if first, dup := mountBlocks[m.Name]; dup {
				diags = append(diags, hcldecode.LabelError(b, "Duplicate mount", fmt.Sprintf("A mount named %q was already declared at %s. Mount names must be unique within a step: each is preopened at /mnt/<name>.", m.Name, first.DefRange)))
				continue
			}
			mountBlocks[m.Name] = b
			s.Mounts = append(s.Mounts, m)
		}
	}
	return diags
}

// decodeHTTPBlock decodes an http block, applying defaults for what it
// leaves out.
func decodeHTTPBlock(block *hcl.Block) (*HTTPGrant, hcl.Diagnostics) {
	g := &HTTPGrant{MaxBytes: DefaultHTTPMaxBytes, Timeout: DefaultHTTPTimeout, DeclRange: block.DefRange}
	content, diags := block.Body.Content(httpSchema)

	maxBytes := uint64(g.MaxBytes)
	diags = append(diags, hcldecode.Fields(content.Attributes,
		hcldecode.Set("allow", &g.Allow, constHostList),
		hcldecode.Set("max_bytes", &maxBytes, hcldecode.Size("Invalid size", "size", 1, MaxHTTPMaxBytes,
			"max_bytes must be between 1 byte and 4GiB (the most a plugin can hold); got %d bytes.")),
		hcldecode.Set("timeout", &g.Timeout, hcldecode.Positive("timeout must be positive; got %q.")),
	)...)
	g.MaxBytes = int64(maxBytes)
	return g, diags
}

// decodeEffectBlock decodes an effect block of a known kind.
func decodeEffectBlock(block *hcl.Block) (*EffectGrant, hcl.Diagnostics) {
	g := &EffectGrant{Kind: block.Labels[0], Mode: DefaultEffectMode, DeclRange: block.DefRange}
	content, diags := block.Body.Content(effectSchema)
	attrs := content.Attributes

	if attr, ok := attrs["hosts"]; ok {
		if g.Kind != EffectHTTP {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsupported argument",
				Detail:   fmt.Sprintf("hosts is only valid in an effect \"http\" block; effects of kind %q reach no hosts.", g.Kind),
				Subject:  attr.NameRange.Ptr(),
				Context:  block.DefRange.Ptr(),
			})
		} else {
			hosts, d := constHostList(attr)
			diags = append(diags, d...)
			g.Hosts = hosts
		}
	} else if g.Kind == EffectHTTP {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing required argument",
			Detail:   `The argument "hosts" is required in an effect "http" block: it lists the hosts the step may send effects to.`,
			Subject:  block.Body.MissingItemRange().Ptr(),
		})
	}

	modeOK := true
	modeAttr, hasMode := attrs["mode"]
	if hasMode {
		mode, d := hcldecode.OneOf("Invalid effect mode", `mode must be "resend", "check" or "manual"`, effectModes...)(modeAttr)
		diags = append(diags, d...)
		if modeOK = !d.HasErrors(); modeOK {
			g.Mode = mode
		}
	}

	urlAttr, hasURL := attrs["check_url"]
	diags = append(diags, hcldecode.Fields(attrs, hcldecode.Set("check_url", &g.CheckURL, urlCheck("Invalid check URL",
		`check_url must be an http or https URL without query or fragment, such as "http://127.0.0.1:8080/applied"`, checkURLProblem)))...)
	switch {
	case !modeOK:
		// Whether check_url belongs depends on a mode already reported.
	case g.Mode == EffectModeCheck && !hasURL:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing check URL",
			Detail:   `mode "check" asks check_url whether an effect was applied (GET <check_url>?key=<idempotency key>), so it needs a check_url.`,
			Subject:  modeAttr.Expr.Range().Ptr(),
			Context:  block.DefRange.Ptr(),
		})
	case g.Mode != EffectModeCheck && hasURL:
		g.CheckURL = ""
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Check URL without check mode",
			Detail:   fmt.Sprintf("check_url is only used with mode = \"check\"; this effect's mode is %q.", g.Mode),
			Subject:  urlAttr.Range.Ptr(),
			Context:  block.DefRange.Ptr(),
		})
	}
	return g, diags
}

// urlCheck decodes a URL that problem (which says what is wrong with one,
// or "") accepts: another is an error with summary and the detail usage,
// "; " and the problem.
func urlCheck(summary, usage string, problem func(u string) string) hcldecode.Decoder[string] {
	return hcldecode.Check(hcldecode.String, summary, func(u string) string {
		if why := problem(u); why != "" {
			return usage + "; " + why + "."
		}
		return ""
	})
}

// httpURL parses u, an http or https URL with a host; problem says what
// is wrong with it, or is "".
func httpURL(u string) (parsed *url.URL, problem string) {
	parsed, err := url.Parse(u)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("%q does not parse", u)
	case parsed.Scheme != "http" && parsed.Scheme != "https":
		if parsed.Scheme == "" {
			return nil, fmt.Sprintf("%q has no scheme", u)
		}
		return nil, fmt.Sprintf("%q has the scheme %q", u, parsed.Scheme)
	case parsed.Opaque != "" || parsed.Host == "" || parsed.Hostname() == "":
		return nil, fmt.Sprintf("%q has no host", u)
	}
	return parsed, ""
}

// checkURLProblem says what is wrong with u as a check_url, or "".
func checkURLProblem(u string) string {
	parsed, problem := httpURL(u)
	switch {
	case problem != "":
		return problem
	case parsed.User != nil:
		return fmt.Sprintf("%q has user information", u)
	case parsed.RawQuery != "" || parsed.ForceQuery:
		return fmt.Sprintf("%q has a query; the engine adds ?key=<idempotency key> itself", u)
	case parsed.Fragment != "" || strings.Contains(u, "#"):
		return fmt.Sprintf("%q has a fragment", u)
	}
	return ""
}

// decodeMountBlock decodes a mount block. SourcePath is filled in by
// decodeFile, which knows the task's directory.
func decodeMountBlock(block *hcl.Block) (*Mount, hcl.Diagnostics) {
	m := &Mount{Name: block.Labels[0], DeclRange: block.DefRange, sourceRange: block.DefRange}
	var diags hcl.Diagnostics
	if !hclsyntax.ValidIdentifier(m.Name) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid mount name",
			Detail:   "A mount name must start with a letter or underscore and contain only letters, digits, underscores and dashes: it becomes the directory /mnt/<name>.",
			Subject:  block.LabelRanges[0].Ptr(),
			Context:  block.DefRange.Ptr(),
		})
	}
	content, moreDiags := block.Body.Content(mountSchema)
	diags = append(diags, moreDiags...)
	if attr, ok := content.Attributes["source"]; ok {
		m.sourceRange = attr.Expr.Range()
	}
	diags = append(diags, hcldecode.Fields(content.Attributes, hcldecode.Set("source", &m.Source, hcldecode.NotBlank("Empty mount source",
		"source must be the path of a directory, relative to the task file's directory.")))...)
	return m, diags
}

// constHostList evaluates a constant, non-empty list of host patterns and
// returns them lower-cased. A bad element is reported on the element when
// the list is written out literally, else on the whole value.
func constHostList(attr *hcl.Attribute) ([]string, hcl.Diagnostics) {
	list, diags := hcldecode.StringList(attr)
	if diags.HasErrors() {
		return nil, diags
	}
	if len(list) == 0 {
		return nil, append(diags, hcldecode.Error(attr, "Empty host list",
			fmt.Sprintf("%s must list at least one host such as \"example.org\" or \"127.0.0.1:8080\". To grant no hosts, leave the block out.", attr.Name)))
	}
	elems := hcldecode.ElementRanges(attr, len(list))
	out := make([]string, 0, len(list))
	for i, p := range list {
		host, port, err := parseHostPattern(p)
		if err != nil {
			d := hcldecode.Error(attr, "Invalid host pattern",
				fmt.Sprintf("%q is not a host pattern: %s. Write \"host\", \"host:port\" or \"host:*\", such as \"example.org\", \"127.0.0.1:8080\" or \"[::1]:*\".", p, err))
			if elems != nil {
				// The element alone: the whole list would make a long excerpt.
				d.Subject, d.Context = elems[i].Ptr(), nil
			}
			diags = append(diags, d)
			continue
		}
		out = append(out, formatHostPattern(host, port))
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return out, diags
}

// parseHostPattern splits a host pattern into its host (lower-case, IPv6
// without brackets) and its port: "" when none is given, "*" or a decimal
// number from 1 to 65535.
func parseHostPattern(p string) (host, port string, err error) {
	switch {
	case p == "":
		return "", "", errors.New("it is empty")
	case strings.Contains(p, "://"):
		return "", "", errors.New("a host pattern has no scheme")
	case strings.ContainsAny(p, "/?#"):
		return "", "", errors.New("a host pattern has no path, query or fragment")
	case strings.Contains(p, "@"):
		return "", "", errors.New("a host pattern has no user information")
	case strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return "", "", errors.New("it contains spaces, control or non-ASCII characters")
	}

	rest := p
	if strings.HasPrefix(p, "[") {
		end := strings.IndexByte(p, ']')
		if end < 0 {
			return "", "", errors.New("the IPv6 address has no closing bracket")
		}
		host, rest = p[1:end], p[end+1:]
		if ip := net.ParseIP(host); ip == nil || !strings.Contains(host, ":") {
			return "", "", fmt.Errorf("%q is not an IPv6 address", host)
		}
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return "", "", errors.New("only a port may follow the IPv6 address")
		}
	} else {
		switch strings.Count(p, ":") {
		case 0:
			host, rest = p, ""
		case 1:
			i := strings.IndexByte(p, ':')
			host, rest = p[:i], p[i:]
		default:
			return "", "", errors.New("an IPv6 address must be written in brackets, as in \"[::1]:8080\"")
		}
		if err := checkHostname(host); err != nil {
			return "", "", err
		}
	}
	if rest != "" {
		port = rest[1:]
		if port != "*" {
			n, err := strconv.ParseUint(port, 10, 16)
			if err != nil || n == 0 {
				if port == "" {
					return "", "", errors.New("the port is missing after the colon")
				}
				return "", "", fmt.Errorf("the port %q is not \"*\" or a number from 1 to 65535", port)
			}
			port = strconv.FormatUint(n, 10)
		}
	}
	return strings.ToLower(host), port, nil
}

// checkHostname checks a DNS name or an IPv4 address: dot-separated labels
// of letters, digits and dashes, neither starting nor ending with a dash.
func checkHostname(host string) error {
	switch {
	case host == "":
		return errors.New("the host is missing")
	case strings.Contains(host, "*"):
		return errors.New("\"*\" is allowed only as the whole port, not in the host")
	case len(host) > 253:
		return errors.New("the host is longer than 253 characters")
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("each dot-separated part of the host must have 1 to 63 characters")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("a part of the host may not start or end with a dash")
		}
		for _, r := range label {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-') {
				return fmt.Errorf("%q is not allowed in a host name", r)
			}
		}
	}
	return nil
}

// formatHostPattern writes a host pattern back from parseHostPattern's parts.
func formatHostPattern(host, port string) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" {
		return host
	}
	return host + ":" + port
}

// HostAllowed reports whether hostport, a "host:port" with the port always
// present (e.g. "127.0.0.1:8080", "example.org:443", "[::1]:8080"), matches
// one of patterns. A pattern is "host", "host:port" or "host:*": without a
// port it matches ports 80 and 443 only; "host:*" matches any port. Host
// names compare case-insensitively and IP addresses by value. Patterns that
// are not valid (see the task language's host syntax) match nothing, and a
// hostport that is not host:port with a port from 1 to 65535 is never allowed.
func HostAllowed(patterns []string, hostport string) bool {
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil || host == "" {
		return false
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return false
	}
	for _, p := range patterns {
		pHost, pPort, err := parseHostPattern(p)
		if err != nil || !sameHost(pHost, host) {
			continue
		}
		switch pPort {
		case "*":
			return true
		case "":
			if port == 80 || port == 443 {
				return true
			}
		default:
			if pPort == strconv.FormatUint(port, 10) {
				return true
			}
		}
	}
	return false
}

// sameHost reports whether the pattern host p names the host h.
func sameHost(p, h string) bool {
	if strings.EqualFold(p, h) {
		return true
	}
	pIP, hIP := net.ParseIP(p), net.ParseIP(h)
	return pIP != nil && hIP != nil && pIP.Equal(hIP)
}

// checkMounts stats each step's mount sources on the local disk: each must
// be a directory. A mount names the disk of the machine that runs the
// task, so Files that are read for another machine skip it (ChecksMounts).
func (t *Task) checkMounts() hcl.Diagnostics {
	var diags hcl.Diagnostics
	if !ChecksMounts(t.files) {
		return nil
	}
	for _, s := range t.Steps {
		for _, m := range s.Mounts {
			if m.SourcePath == "" {
				continue
			}
			info, err := os.Stat(m.SourcePath)
			if err == nil && info.IsDir() {
				continue
			}
			d := &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot read mount source",
				Detail:   fmt.Sprintf("The source %q (%s) of mount %q could not be read: %s.", m.Source, m.SourcePath, m.Name, err),
				Subject:  m.sourceRange.Ptr(),
			}
			switch {
			case err == nil:
				d.Summary = "Mount source is not a directory"
				d.Detail = fmt.Sprintf("%s is not a directory; a mount preopens a directory at /mnt/%s.", m.SourcePath, m.Name)
			case errors.Is(err, fs.ErrNotExist):
				d.Summary = "Mount source not found"
				d.Detail = fmt.Sprintf("There is no directory %s. Mount sources are relative to the directory of the task file.", m.SourcePath)
			}
			diags = append(diags, d)
		}
	}
	return diags
}
