package proc_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/proc"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
)

// TestStreamLines holds StreamLines to StreamRaw on the same output: the
// guesses a Lexer reads as one object taken as they are, the others (or
// all of them) refused, the values and the end must be StreamRaw's.
func TestStreamLines(t *testing.T) {
	echoTail := func(tail []byte) (map[string]any, bool) {
		return map[string]any{"repaired": string(tail)}, true
	}
	tests := []struct {
		name string
		in   proc.Spec
	}{
		{name: "split writes and runes", in: fakeSpec("split")},
		{name: "concatenated and blank lines", in: fakeSpec("concat")},
		{name: "two on a line, one over lines", in: script("out:{\"a\":1} {\"b\":2}\n{\"c\":\n[1,\n2]}\r\n{\"d\":\"\\n\"}\n")},
		{name: "a line that is not JSON", in: script("out:{\"a\":1}\n{\"b\" 2}\n{\"c\":3}\n")},
		{name: "not a map", in: script("out:{\"a\":1}\n42\n{\"b\":2}\n")},
		{name: "no output", in: script()},
		{name: "final object without newline", in: script(`out:{"a":1}`, "sleep:20ms", `out:{"b":`, "sleep:20ms", `out:2}`)},
		{name: "repaired tail", in: func() proc.Spec {
			s := script("out:{\"a\":1}\n" + `{"b":"cut`)
			s.TailRepair = echoTail
			return s
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var want []string
			for b, err := range proc.StreamRaw(testContext(t), tt.in) {
				want = append(want, outcome(b, err))
			}
			for _, refuseAll := range []bool{false, true} {
				var got []string
				guesses, refused := 0, 0
				for l, err := range proc.StreamLines(testContext(t), tt.in) {
					if err != nil {
						got = append(got, outcome(nil, err))
						continue
					}
					b := l.Bytes
					if l.Guess {
						guesses++
						lx := ndjson.NewLexer(b)
						lx.Skip()
						if !lx.End() || refuseAll {
							refused++
							l.Refuse()
							continue
						}
						b = bytes.TrimRight(b, " \t\r\n")
					}
					got = append(got, outcome(b, nil))
				}
				if !slices.Equal(got, want) {
					t.Errorf("refusing all %t: StreamLines gave\n %q\nStreamRaw gave\n %q", refuseAll, got, want)
				}
				if refuseAll && refused != guesses {
					t.Errorf("refused %d of %d guesses, want all", refused, guesses)
				}
			}
		})
	}
}

// outcome is one step of a raw stream, as a string to compare.
func outcome(b []byte, err error) string {
	if err != nil {
		return fmt.Sprintf("error %v", err)
	}
	return string(b)
}
