package taskfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/lhengine/lhengine/engine/internal/hcldecode"
)

// MaxPromptBytes bounds the text of one prompt, and MaxPromptsBytes the
// texts of all the prompts of a task: they are pinned in the run manifest,
// which every worker and every status report reads.
const (
	MaxPromptBytes  = 1 << 20
	MaxPromptsBytes = 4 << 20
)

// Prompt is a prompt a task declares with a prompt "NAME" block: a text
// given in the task file (text) or read from a file beside it (file) when
// the task is submitted, with an optional version identifier. Steps read
// it in their expressions as prompt.NAME, a string. The submitted task
// runs the text pinned in its manifest, never the file.
type Prompt struct {
	Name     string
	Version  string // "" when the block gives none
	File     string // as written; "" for a text prompt
	FilePath string // filepath.Join(Task.Dir, File) unless File is absolute
	// Text is the prompt's text: the text attribute, or the file's content
	// when Parse ran with Options.CheckPlugins (otherwise "" for a file
	// prompt: its text comes from a manifest).
	Text      string
	DeclRange hcl.Range // the prompt block's header

	fileRange hcl.Range // the file expression
}

var promptSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "file"},
		{Name: "text"},
		{Name: "version"},
	},
}

// decodePromptBlock decodes a prompt block: exactly one of file and text,
// and an optional version.
func decodePromptBlock(block *hcl.Block) (*Prompt, hcl.Diagnostics) {
	p := &Prompt{Name: block.Labels[0], DeclRange: block.DefRange}
	var diags hcl.Diagnostics
	if !hclsyntax.ValidIdentifier(p.Name) {
		diags = append(diags, hcldecode.InvalidName("prompt", block))
	}
	content, moreDiags := block.Body.Content(promptSchema)
	diags = append(diags, moreDiags...)
	attrs := content.Attributes
	file, hasFile := attrs["file"]
	text, hasText := attrs["text"]
	switch {
	case hasFile && hasText:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Prompt has both file and text",
			Detail:   fmt.Sprintf("Prompt %q sets both file and text; give exactly one: file = \"prompts/%s.md\" (read when the task is submitted) or text = \"...\".", p.Name, p.Name),
			Subject:  text.Range.Ptr(),
			Context:  block.DefRange.Ptr(),
		})
	case !hasFile && !hasText:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Prompt has no text",
			Detail:   fmt.Sprintf("Prompt %q needs exactly one of file = \"prompts/%s.md\" (a file beside the task file, read when the task is submitted) or text = \"...\".", p.Name, p.Name),
			Subject:  block.DefRange.Ptr(),
		})
	}
	if hasFile && !hasText {
		diags = append(diags, hcldecode.Fields(attrs, hcldecode.Set("file", &p.File,
			hcldecode.NotEmpty("Invalid prompt file", "file must name a file, relative to the task file's directory.")))...)
		if p.File != "" {
			p.fileRange = file.Expr.Range()
		}
	}
	return p, append(diags, hcldecode.Fields(attrs,
		hcldecode.Set("text", &p.Text, hcldecode.Check(hcldecode.String, "Prompt too large", func(t string) string {
			if len(t) <= MaxPromptBytes {
				return ""
			}
			return fmt.Sprintf("The text of prompt %q is %d bytes; a prompt is at most %d bytes.", p.Name, len(t), MaxPromptBytes)
		})),
		hcldecode.Set("version", &p.Version, hcldecode.String),
	)...)
}

// Prompt returns the prompt with the given name, or nil.
func (t *Task) Prompt(name string) *Prompt {
	for _, p := range t.Prompts {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// readPrompts reads the text of each file prompt, reporting on its file
// attribute a file that is missing, larger than MaxPromptBytes or not
// UTF-8 text.
func (t *Task) readPrompts() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, p := range t.Prompts {
		if p.FilePath == "" {
			continue
		}
		text, err := readPromptFile(t.files, p.FilePath)
		if err == nil {
			p.Text = text
			continue
		}
		d := &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot read prompt file",
			Detail:   fmt.Sprintf("The file %s of prompt %q could not be read: %s.", p.FilePath, p.Name, err),
			Subject:  p.fileRange.Ptr(),
			Context:  p.DeclRange.Ptr(),
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			d.Summary = "Prompt file not found"
			d.Detail = fmt.Sprintf("There is no file %s. Prompt files are relative to the directory of the task file.", p.FilePath)
		case errors.Is(err, errPromptTooLarge):
			d.Summary = "Prompt too large"
			d.Detail = fmt.Sprintf("The file %s of prompt %q is more than %d bytes; a prompt is at most %d bytes.", p.FilePath, p.Name, MaxPromptBytes, MaxPromptBytes)
		case errors.Is(err, errPromptNotText):
			d.Summary = "Prompt file is not text"
			d.Detail = fmt.Sprintf("The file %s of prompt %q is not UTF-8 text.", p.FilePath, p.Name)
		}
		diags = append(diags, d)
	}
	if diags.HasErrors() {
		return diags
	}
	total := 0
	for _, p := range t.Prompts {
		if total += len(p.Text); total > MaxPromptsBytes {
			return append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Prompts too large",
				Detail:   fmt.Sprintf("With prompt %q the task's prompts are more than %d bytes in all; they are pinned in the run manifest, which every worker reads.", p.Name, MaxPromptsBytes),
				Subject:  p.DeclRange.Ptr(),
			})
		}
	}
	return diags
}

var (
	errPromptTooLarge = errors.New("too large")
	errPromptNotText  = errors.New("not UTF-8 text")
)

// readPromptFile reads a prompt file of at most MaxPromptBytes of UTF-8
// text.
func readPromptFile(files Files, path string) (string, error) {
	f, err := orOS(files).Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPromptBytes+1))
	switch {
	case err != nil:
		return "", err
	case len(b) > MaxPromptBytes:
		return "", errPromptTooLarge
	case !utf8.Valid(b):
		return "", errPromptNotText
	}
	return string(b), nil
}
