package jsonval

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// pageCheck is the output of one unit of the site-audit example's check
// step (plugins/examples/site-audit/check) for page i, with links broken
// links.
func pageCheck(i, links int) string {
	broken := make([]string, links)
	for j := range broken {
		broken[j] = fmt.Sprintf(`"https://example.org/section-%d/page-%d-link-%d"`, i%17, i, j)
	}
	return fmt.Sprintf(`{"url":"https://example.org/section-%d/page-%d","status":200,"title":"Page %d of the example site",`+
		`"h1":"Page %d","missing_title":false,"missing_description":%t,"broken_links":[%s],"links_checked":%d,"images_without_alt":%d}`,
		i%17, i, i, i, i%5 == 0, strings.Join(broken, ","), 20+i%13, i%3)
}

// stepOutputs are the step outputs BenchmarkFromJSON decodes: one page's
// check (1 KiB), a report of 64 KiB (its text and the checks of the pages
// it covers), and the checks of 1,000 pages as one output.
func stepOutputs() []struct {
	name string
	doc  []byte
} {
	var report bytes.Buffer
	report.WriteString(`{"summary":"`)
	for report.Len() < 32<<10 {
		report.WriteString("Page titles are missing on 3 pages and duplicated in 2 groups; 19 links answer 404. ")
	}
	report.WriteString(`","pages":[`)
	for i := 0; report.Len() < 64<<10-300; i++ {
		if i > 0 {
			report.WriteByte(',')
		}
		report.WriteString(pageCheck(i, i%3))
	}
	report.WriteString("]}")
	pages := make([]string, 1000)
	for i := range pages {
		pages[i] = pageCheck(i, i%3)
	}
	return []struct {
		name string
		doc  []byte
	}{
		{"1KiB", []byte(pageCheck(7, 17))},
		{"64KiB", report.Bytes()},
		{"1000-items", []byte("[" + strings.Join(pages, ",") + "]")},
	}
}

// TestStepOutputs checks that the outputs BenchmarkFromJSON decodes are
// the sizes it says and decode alike with both decoders.
func TestStepOutputs(t *testing.T) {
	t.Parallel()
	outs := stepOutputs()
	sizes := []int{1 << 10, 64 << 10, 0}
	for i, o := range outs {
		if sizes[i] > 0 && (len(o.doc) < sizes[i]*9/10 || len(o.doc) > sizes[i]*11/10) {
			t.Fatalf("%s is %d bytes", o.name, len(o.doc))
		}
		requireSameAsReference(t, o.doc)
	}
	v, err := FromJSON(outs[2].doc)
	if err != nil || v.LengthInt() != 1000 {
		t.Fatalf("1000-items: %v", err)
	}
}

// BenchmarkFromJSON decodes typical step outputs (stepOutputs) with
// FromJSON ("handwritten"), with the decoder it replaced, go-cty's
// ImpliedType and Unmarshal behind the same bounds scan ("go-cty",
// fromJSONReference), and with go-cty's decoder alone, without the bounds
// ("go-cty-unbounded", which FromJSON could not be: a deep document would
// overflow its stack).
func BenchmarkFromJSON(b *testing.B) {
	decoders := []struct {
		name   string
		decode func([]byte) (cty.Value, error)
	}{
		{"handwritten", FromJSON},
		{"go-cty", fromJSONReference},
		{"go-cty-unbounded", func(doc []byte) (cty.Value, error) {
			ty, err := ctyjson.ImpliedType(doc)
			if err != nil {
				return cty.NilVal, err
			}
			return ctyjson.Unmarshal(doc, ty)
		}},
	}
	for _, o := range stepOutputs() {
		for _, d := range decoders {
			b.Run(o.name+"/"+d.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(o.doc)))
				for b.Loop() {
					if _, err := d.decode(o.doc); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
