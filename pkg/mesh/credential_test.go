package mesh_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

const testCredentialEnv = "AGENTMESH_TEST_OPENAI_KEY"

// remoteMesh runs the mesh on profiles for fixture, openai (credential from
// testCredentialEnv) and ollama, both remote ones served by fixture servers.
func remoteMesh(t *testing.T) (*servicetest.Buffer, *prometheus.Registry, func(profile string, req map[string]any) []wire.Event, *replay.Server) {
	t.Helper()
	oa, err := replay.Start("../../testdata/remote/openai")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { oa.Close() })
	ol, err := replay.Start("../../testdata/remote/ollama")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ol.Close() })
	files := map[string]string{
		"fixture.yaml": "schema: 1\nname: fixture\nadapter: fixture\ntransport: in_process\nmodel: fixture-1\npricing: {input: \"0\", output: \"0\"}\n",
		"openai.yaml": fmt.Sprintf("schema: 1\nname: openai\nadapter: openai\ntransport: remote\nmodel: gpt-5.5\nbase_url: %s/text\nallow_loopback: true\ncredential_env: %s\n"+
			"pricing: {input: \"1.25\", output: \"10\", cache_read: \"0.125\", reasoning: \"10\"}\n", oa.URL(), testCredentialEnv),
		"ollama.yaml": fmt.Sprintf("schema: 1\nname: ollama\nadapter: ollama\ntransport: remote\nmodel: llama3.2\nbase_url: %s/plain-text\nallow_loopback: true\npricing: {input: \"0\", output: \"0\"}\n", ol.URL()),
	}
	logs := &servicetest.Buffer{} // shared by the mesh's goroutines
	reg := prometheus.NewRegistry()
	c := catalogMesh(t, files, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), reg)
	run := func(profileName string, req map[string]any) []wire.Event {
		r := runReq(t, req)
		r.Profile = profileName
		_, evs := clienttest.Run(t, c, r)
		return evs
	}
	return logs, reg, run, oa
}

func TestMissingCredentialMakesOnlyThatProviderUnavailable(t *testing.T) {
	t.Setenv(testCredentialEnv, "")
	_, _, run, _ := remoteMesh(t)
	evs := run("openai", map[string]any{"prompt": "hi"})
	if st := last(evs); describe(evs) != "[accepted rejected]" || !errors.Is(st.Error, wire.ProviderUnavailable) {
		t.Fatalf("openai without a credential: %s %v; want rejected with ProviderUnavailable", describe(evs), st.Error)
	}
	for _, p := range []string{"fixture", "ollama"} {
		if st := last(run(p, map[string]any{"prompt": "hi"})); st.State != wire.StateSucceeded {
			t.Fatalf("%s: %s %v", p, st.State, st.Error)
		}
	}
}

func TestCredentialAppearsNowhere(t *testing.T) {
	const key = "sk-test-DO-NOT-LEAK-5f2c9a71e8"
	t.Setenv(testCredentialEnv, key)
	logs, reg, run, oa := remoteMesh(t)
	var all []wire.Event
	for _, p := range []string{"openai", "ollama", "fixture"} {
		evs := run(p, map[string]any{"prompt": "hi"})
		if st := last(evs); st.State != wire.StateSucceeded {
			t.Fatalf("%s: %s %v", p, st.State, st.Error)
		}
		all = append(all, evs...)
	}
	// A failing run puts the provider's error text in an event too.
	all = append(all, run("openai", map[string]any{"prompt": "hi", "bogus": true})...)
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&metrics, mf); err != nil {
			t.Fatal(err)
		}
	}
	for what, text := range map[string]string{"events": string(b), "logs": logs.String(), "metrics": metrics.String()} {
		if strings.Contains(text, key) || strings.Contains(text, "DO-NOT-LEAK") {
			t.Errorf("the credential appears in the %s", what)
		}
	}
	if logs.String() == "" || metrics.Len() == 0 {
		t.Fatal("nothing was scanned")
	}
	// It was used, in the one place it belongs.
	if reqs := oa.Requests(); len(reqs) == 0 || reqs[0].Header.Get("Authorization") != "Bearer "+key {
		t.Fatal("the openai request did not carry the credential")
	}
}
