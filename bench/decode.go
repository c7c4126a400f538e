package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/codex"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/gemini"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/pi"
	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// A Transcript is one CLI's stdout bytes for the decode measurement: runs
// of the CLI, each a complete NDJSON transcript, one after another, and
// the parser that reads one run.
type Transcript struct {
	Name string
	// Runs are the stdout of each run, in order.
	Runs [][]byte
	// NewParser returns the CLI's parser for one run, as its adapter makes it.
	NewParser func() cli.Parser
}

// Bytes is the size of all the runs.
func (t Transcript) Bytes() int {
	n := 0
	for _, r := range t.Runs {
		n += len(r)
	}
	return n
}

// FakeTranscript is the fake CLI's stdout (FakeCLI) for runs runs of
// chunks text chunks of chunkBytes bytes each, read by the claude-code
// parser.
func FakeTranscript(runs, chunks, chunkBytes int) (Transcript, error) {
	var out, stderr bytes.Buffer
	if code := FakeCLI([]string{"--model", CLIModel, fmt.Sprintf("%d %d", chunks, chunkBytes)}, &out, &stderr); code != 0 {
		return Transcript{}, fmt.Errorf("fake cli exited %d: %s", code, stderr.String())
	}
	t := Transcript{Name: "claude-fake", NewParser: func() cli.Parser { return claudecode.NewParser() }}
	for range runs {
		t.Runs = append(t.Runs, out.Bytes())
	}
	return t, nil
}

// CLITranscripts are the recorded transcripts of each CLI under
// testdata/cli (relative to the repository's root, root), the ones whose
// CLI exited 0 and wrote NDJSON (not asked for --output-format json), repeated until each CLI's runs hold about size bytes, each
// read by its CLI's parser.
func CLITranscripts(root string, size int) ([]Transcript, error) {
	call := adapter.Call{RunID: "bench-decode", Attempt: 1, MaxAttempts: wire.DefaultMaxAttempts}
	// Each Spec is made once, as an adapter makes it, and its NewParser
	// called per run, as the adapter's Stream calls it.
	codexSpec, geminiSpec, piSpec := codex.Spec(), gemini.Spec(), pi.Spec()
	clis := []Transcript{
		{Name: "claude-code", NewParser: func() cli.Parser { return claudecode.NewParser() }},
		{Name: "codex", NewParser: func() cli.Parser { return codexSpec.NewParser(codex.Request{}, call) }},
		{Name: "gemini", NewParser: func() cli.Parser { return geminiSpec.NewParser(gemini.Request{}, call) }},
		{Name: "pi", NewParser: func() cli.Parser { return piSpec.NewParser(pi.Request{}, call) }},
	}
	for i := range clis {
		t := &clis[i]
		files, err := filepath.Glob(filepath.Join(root, "testdata", "cli", t.Name, "*.stdout.ndjson"))
		if err != nil {
			return nil, err
		}
		var runs [][]byte
		for _, f := range files {
			exit, err := os.ReadFile(f[:len(f)-len(".stdout.ndjson")] + ".exit")
			if err != nil || string(bytes.TrimSpace(exit)) != "0" {
				continue
			}
			base := f[:len(f)-len(".stdout.ndjson")]
			if asJSON, err := outputJSON(base + ".argv"); err != nil {
				return nil, err
			} else if asJSON {
				continue // --output-format json: one value, not the NDJSON the adapters ask for
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
				continue
			}
			runs = append(runs, b)
		}
		if len(runs) == 0 {
			return nil, fmt.Errorf("no transcripts of %s that exited 0 under %s", t.Name, root)
		}
		for n := 0; n < size; {
			for _, r := range runs {
				t.Runs = append(t.Runs, r)
				n += len(r)
			}
		}
	}
	return clis, nil
}

// outputJSON reports whether the recorded argv (a JSON array of strings)
// at path asks for --output-format json; a transcript without an argv
// file does not.
func outputJSON(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var argv []string
	if err := json.Unmarshal(b, &argv); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == "--output-format" && argv[i+1] == "json" {
			return true, nil
		}
	}
	return false, nil
}

// Decode reads every run the way a CLI adapter reads its child's stdout
// (cli.Stream without the child: cli.FeedAll) with a fresh parser per run,
// then End. It returns the chunks produced. A run whose stdout does not decode is an
// error; a parser error ends that run, as it ends a stream, and is not.
func (t Transcript) Decode() (int, error) {
	chunks := 0
	for i, run := range t.Runs {
		p := t.NewParser()
		var bad error
		err := cli.FeedAll(p, ndjson.NewDecoder(bytes.NewReader(run)), func(cs []wire.Chunk, err error) bool {
			chunks += len(cs)
			var de *cli.DecodeError
			if errors.As(err, &de) {
				bad = err
			}
			return err == nil
		})
		if err == nil {
			err = bad
		}
		if err != nil {
			return chunks, fmt.Errorf("%s run %d: %w", t.Name, i, err)
		}
		cs, _ := p.End()
		chunks += len(cs)
	}
	return chunks, nil
}

// DecodeMaps is the baseline of Decode: encoding/json's Decoder reading
// every run's values into map[string]any, no parser. It returns the
// values read.
func (t Transcript) DecodeMaps() (int, error) {
	n := 0
	for i, run := range t.Runs {
		dec := json.NewDecoder(bytes.NewReader(run))
		for {
			var m map[string]any
			err := dec.Decode(&m)
			if err == io.EOF {
				break
			}
			if err != nil {
				return n, fmt.Errorf("%s run %d: %w", t.Name, i, err)
			}
			n++
		}
	}
	return n, nil
}
