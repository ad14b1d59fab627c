package taskfile

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParseLength parses a pipeline of n serial steps, each reading
// the one before it: the cost per step must not grow with n (checking
// types once built every step's context from all earlier steps).
func BenchmarkParseLength(b *testing.B) {
	for _, n := range []int{50, 1000} {
		var sb strings.Builder
		sb.WriteString("task \"serial\" {\n")
		for i := range n {
			in := `{ mode = "echo" }`
			if i > 0 {
				in = fmt.Sprintf(`{ mode = "echo", prev = step.s%d.output }`, i-1)
			}
			fmt.Fprintf(&sb, "  step \"s%d\" {\n    plugin = \"step.wasm\"\n    input  = %s\n  }\n", i, in)
		}
		sb.WriteString("}\n")
		src := []byte(sb.String())
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				if _, d := Parse("task.hcl", src, Options{}); d.HasErrors() {
					b.Fatal(d)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/step")
		})
	}
}
