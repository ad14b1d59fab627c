// Command compactor is the step the compact-notes policy inserts beside a
// long fan-out: once the task holds more than keep_under open notes
// (findings and earlier summaries no summary replaced), it replaces them
// with one summary per step and kind that keeps their number and their
// most common shapes (digits folded, so "page 17: no title" and "page 18:
// no title" count as one). It never sees decisions or blockers: the engine
// does not list them (notes.list), and it cannot replace them.
//
// Build, from the module root:
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/compactor/compactor.wasm ./plugins/examples/compactor
package main

import (
	"fmt"
	"sort"
	"strings"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

// Output says what one run of the step did.
type Output struct {
	Open      int `json:"open"`
	Summaries int `json:"summaries"`
	Replaced  int `json:"replaced"`
}

// maxNotes bounds how many open notes one run reads.
const maxNotes = 20_000

func compact(ctx *sdk.Context, _ any) (Output, error) {
	keep := ctx.Policy.Int("keep_under", 50)
	var notes []sdk.Note
	after := int64(-1)
	for len(notes) < maxNotes {
		page, err := ctx.OpenNotes(after, 1000)
		if err != nil {
			return Output{}, err
		}
		if len(page) == 0 {
			break
		}
		notes = append(notes, page...)
		after = int64(page[len(page)-1].Seq)
	}
	out := Output{Open: len(notes)}
	if len(notes) <= keep {
		return out, nil
	}
	type group struct {
		step, kind string
		seqs       []uint64
		shapes     map[string]int
		total      int
	}
	groups := map[string]*group{}
	var order []string
	for _, n := range notes {
		kind, step, count := n.Kind, n.Step, 1
		if kind == "summary" {
			// A summary stands for the notes of the step it names.
			kind = "finding"
			count, step = summarised(n.Text, n.Step)
		}
		k := step + "\x00" + kind
		g := groups[k]
		if g == nil {
			g = &group{step: step, kind: kind, shapes: map[string]int{}}
			groups[k] = g
			order = append(order, k)
		}
		g.seqs = append(g.seqs, n.Seq)
		if n.Kind == "summary" {
			g.total += count
			g.shapes["(earlier summary)"]++
		} else {
			g.total++
			g.shapes[shape(n.Text)]++
		}
	}
	for _, k := range order {
		g := groups[k]
		if len(g.seqs) < 2 {
			continue
		}
		text := fmt.Sprintf("%d %ss of step %s; most common: %s", g.total, g.kind, g.step, common(g.shapes, 5))
		if _, err := ctx.CompactNotes(g.seqs, text); err != nil {
			return out, err
		}
		out.Summaries++
		out.Replaced += len(g.seqs)
	}
	return out, nil
}

// shape folds the digits of a note's text, cut to 80 bytes.
func shape(text string) string {
	var b strings.Builder
	prevDigit := false
	for _, r := range text {
		if r >= '0' && r <= '9' {
			if !prevDigit {
				b.WriteByte('#')
			}
			prevDigit = true
			continue
		}
		prevDigit = false
		b.WriteRune(r)
	}
	s := b.String()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// summarised reads back how many notes an earlier summary of this
// compactor stood for, and of which step ("N findings of step S; ...");
// a summary written otherwise counts as one note of step def.
func summarised(text, def string) (int, string) {
	var n int
	if _, err := fmt.Sscanf(text, "%d ", &n); err != nil || n < 1 {
		return 1, def
	}
	_, rest, ok := strings.Cut(text, " of step ")
	if !ok {
		return n, def
	}
	step, _, _ := strings.Cut(rest, ";")
	return n, step
}

// common lists the k most common shapes with their counts.
func common(shapes map[string]int, k int) string {
	type kv struct {
		s string
		n int
	}
	var all []kv
	for s, n := range shapes {
		all = append(all, kv{s, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].s < all[j].s })
	var parts []string
	for _, e := range all[:min(k, len(all))] {
		parts = append(parts, fmt.Sprintf("%q ×%d", e.s, e.n))
	}
	return strings.Join(parts, ", ")
}

func main() { sdk.Run(compact) }
