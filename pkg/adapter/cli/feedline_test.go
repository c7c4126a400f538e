package cli_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/gemini"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/pi"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// lineParsers are the CLI parsers with a fast path, made as their adapters
// make them.
var lineParsers = func() map[string]func() cli.LineParser {
	call := adapter.Call{RunID: "feed-line", Attempt: 1, MaxAttempts: wire.DefaultMaxAttempts}
	codexSpec, geminiSpec, piSpec := codex.Spec(), gemini.Spec(), pi.Spec()
	as := func(p cli.Parser) cli.LineParser { return p.(cli.LineParser) }
	return map[string]func() cli.LineParser{
		"claude-code": func() cli.LineParser { return claudecode.NewParser() },
		"codex":       func() cli.LineParser { return as(codexSpec.NewParser(codex.Request{}, call)) },
		"gemini":      func() cli.LineParser { return as(geminiSpec.NewParser(gemini.Request{}, call)) },
		"pi":          func() cli.LineParser { return as(piSpec.NewParser(pi.Request{}, call)) },
	}
}()

// feedAll reads data as a CLI's stdout and records what the parser made of
// each value, and of the end, until the stream would end: with lines as
// cli.Stream reads a child (FeedAll), else framed by NextBytes and fed
// (the reference).
func feedAll(p cli.LineParser, data []byte, lines bool) []step {
	var out []step
	record := func(chunks []wire.Chunk, err error) bool {
		s := step{chunks: slices.Clone(chunks)} // (Line may reuse its slice)
		var de *cli.DecodeError
		if errors.As(err, &de) {
			s.err = "decode: " + err.Error()
		} else if err != nil {
			s.err = "parser: " + err.Error()
		}
		out = append(out, s)
		return err == nil
	}
	dec := ndjson.NewDecoder(bytes.NewReader(data))
	var err error
	if lines {
		err = cli.FeedAll(p, dec, record)
	} else {
		var b []byte
		for b, err = dec.NextBytes(); err == nil; b, err = dec.NextBytes() {
			if !record(cli.Feed(p, b)) {
				break
			}
		}
		if err == io.EOF {
			err = nil
		}
	}
	if err != nil {
		return append(out, step{err: "framing: " + err.Error()})
	}
	if n := len(out); n > 0 && out[n-1].err != "" {
		return out
	}
	chunks, err := p.End()
	return append(out, step{chunks: chunks, err: fmt.Sprint("end: ", err)})
}

// step is what one value, or the end, gave.
type step struct {
	chunks []wire.Chunk
	err    string
}

// FuzzFeedLine holds each parser's stream read the way cli.Stream reads a
// child (FeedAll: NextLine, Line on the unframed line, reframing what Line
// leaves) to the same bytes framed first and fed: the same chunks and errors,
// value by value.
func FuzzFeedLine(f *testing.F) {
	root := filepath.Join("..", "..", "..")
	for name := range lineParsers {
		for _, glob := range []string{filepath.Join(root, "testdata", "fuzz", name, "*"), filepath.Join(root, "testdata", "cli", name, "*.stdout.ndjson")} {
			files, err := filepath.Glob(glob)
			if err != nil {
				f.Fatal(err)
			}
			for _, p := range files {
				b, err := os.ReadFile(p)
				if err != nil {
					f.Fatal(err)
				}
				f.Add(b)
			}
		}
	}
	f.Add([]byte("{\"type\":\"system\",\"subtype\":\"init\"} {\"type\":\"result\"}\n{\"type\":\n\"x\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, newParser := range lineParsers {
			want := feedAll(newParser(), data, false)
			if got := feedAll(newParser(), data, true); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: read by lines\n %+v\nframed first\n %+v", name, got, want)
			}
		}
	})
}
