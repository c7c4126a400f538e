package codex

import (
	"bytes"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/conformance"
)

// FuzzCodexParser feeds arbitrary bytes, split into lines, to a fresh
// parser: each line that is a JSON object is an event
// (conformance.FeedEvents). The parser must not panic and must keep the
// stream rules (conformance.CheckParsed) whatever it is given. Seeds are
// every file in testdata/fuzz/codex (the transcripts' and the hand-written
// cases' stdout).
//
//	go test -run '^$' -fuzz '^FuzzCodexParser$' -fuzztime 60s ./pkg/adapter/cli/codex
func FuzzCodexParser(f *testing.F) {
	for _, b := range conformance.Seeds(f, Name, "*") {
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, resume bool) {
		p := NewParser("m", "")
		if resume {
			p = resumedParser()
		}
		fed := conformance.FeedEvents(p, data, nil)
		for _, problem := range conformance.CheckParsed(Capabilities, fed.Chunks, fed.Err) {
			t.Errorf("stream rule: %s", problem)
		}
	})
}

// FuzzProviderFromConfig: the config.toml scanner never panics, and what
// it returns is a bare key the file mentions.
func FuzzProviderFromConfig(f *testing.F) {
	f.Add([]byte(fakeConfigTOML))
	f.Add([]byte("model_provider = \"mine\"\nx = [\n[model_providers.mine]\n]\n"))
	f.Add([]byte("profile = \"p\"\n[profiles.p]\nmodel_provider = 'b'\n[model_providers.b]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := providerFromConfig(b)
		if got != "" && (!bareKeyRE.MatchString(got) || !bytes.Contains(b, []byte(got))) {
			t.Fatalf("providerFromConfig = %q", got)
		}
	})
}
