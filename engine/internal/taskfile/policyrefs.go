package taskfile

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// PolicyRef is a policy selected by a task's policies attribute (or on the
// command line): NAME or NAME@VERSION. It is the task language's, since a
// Task holds the ones its file selects; the policy language
// (engine/internal/policylang) reads and applies the policies themselves.
type PolicyRef struct {
	Name    string
	Version int       // 0: the highest version found
	Range   hcl.Range // the list element; zero when not from a file
}

// Select picks what a run selecting r applies among n policy versions in
// search order, version(i) giving the i-th's name and version: NAME@VERSION
// the first of that name and version, NAME the highest version, the first
// among equal ones. It returns the index picked (-1 for none) and every
// version of the name found, sorted, for the error that says so.
func (r PolicyRef) Select(n int, version func(i int) (string, int)) (found int, versions []int) {
	found = -1
	best := 0
	for i := range n {
		name, v := version(i)
		if name != r.Name {
			continue
		}
		versions = append(versions, v)
		switch {
		case r.Version != 0:
			if v == r.Version && found < 0 {
				found = i
			}
		case found < 0 || v > best:
			found, best = i, v
		}
	}
	slices.Sort(versions)
	return found, slices.Compact(versions)
}

func (r PolicyRef) String() string {
	if r.Version == 0 {
		return r.Name
	}
	return r.Name + "@" + strconv.Itoa(r.Version)
}

// ParsePolicyRef parses NAME or NAME@VERSION (VERSION a whole number >= 1).
func ParsePolicyRef(s string) (PolicyRef, error) {
	name, ver, hasVer := strings.Cut(s, "@")
	if !hclsyntax.ValidIdentifier(name) {
		return PolicyRef{}, fmt.Errorf("%q is not a policy name: a policy name starts with a letter or underscore and holds letters, digits, underscores and dashes", name)
	}
	r := PolicyRef{Name: name}
	if hasVer {
		n, err := strconv.Atoi(ver)
		if err != nil || n < 1 {
			return PolicyRef{}, fmt.Errorf("%q: the version after @ must be a whole number of at least 1", s)
		}
		r.Version = n
	}
	return r, nil
}

// decodePolicyRefs decodes a task's policies attribute.
func decodePolicyRefs(attr *hcl.Attribute) ([]PolicyRef, hcl.Diagnostics) {
	names, diags := hcldecode.StringList(attr)
	if diags.HasErrors() {
		return nil, diags
	}
	elems := hcldecode.ElementRanges(attr, len(names))
	var refs []PolicyRef
	seen := map[string]hcl.Range{}
	for i, s := range names {
		rng := attr.Expr.Range()
		if elems != nil {
			rng = elems[i]
		}
		r, err := ParsePolicyRef(s)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid policy reference",
				Detail:   fmt.Sprintf("A policy is selected as NAME or NAME@VERSION: %v.", err),
				Subject:  rng.Ptr(),
				Context:  attr.Range.Ptr(),
			})
			continue
		}
		if prev, dup := seen[r.Name]; dup {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate policy",
				Detail:   fmt.Sprintf("Policy %q is already selected at %s; a task runs one version of a policy.", r.Name, prev),
				Subject:  rng.Ptr(),
				Context:  attr.Range.Ptr(),
			})
			continue
		}
		seen[r.Name] = rng
		r.Range = rng
		refs = append(refs, r)
	}
	return refs, diags
}
