package mesh_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestFallbackOnRecorded429: a remote profile whose recorded stream is
// OpenAI's 429 falls back to its fallback profile, a remote profile of
// another server whose recorded stream answers; the terminal status and
// the record name the second profile and its pin. The recorded 401 moves
// the run too, and a 400 does not.
func TestFallbackOnRecorded429(t *testing.T) {
	t.Setenv("AGENTMESH_TEST_KEY", "sk-test-fallback-5d1e")
	srv, err := replay.Start("../../testdata/remote/openai")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	const pricing = "pricing: {input: \"1.25\", output: \"10\", cache_read: \"0.125\", reasoning: \"10\"}\n"
	profile := func(name, model, fixture, policy string) string {
		return fmt.Sprintf("schema: 1\nname: %s\nadapter: openai\ntransport: remote\nmodel: %s\nbase_url: %s/%s\nallow_loopback: true\ncredential_env: AGENTMESH_TEST_KEY\n%s%s",
			name, model, srv.URL(), fixture, pricing, policy)
	}
	c := profilesMesh(t, map[string]string{
		"limited.yaml": profile("limited", "gpt-5.5", "http-429", "policy: {max_attempts: 1, fallback: [answers]}\n"),
		"revoked.yaml": profile("revoked", "gpt-5.4", "http-401", "policy: {max_attempts: 1, fallback: [answers]}\n"),
		"refused.yaml": profile("refused", "gpt-5.4-mini", "http-400-context", "policy: {max_attempts: 1, fallback: [answers]}\n"),
		"answers.yaml": profile("answers", "gpt-5.2", "text", ""),
	})
	run := func(name string) (wire.Status, wire.RunRecord, []wire.Event) {
		t.Helper()
		r := runReq(t, map[string]any{"prompt": "hi"})
		r.Profile = name
		id, evs := clienttest.Run(t, c, r)
		checkGapless(t, evs)
		clienttest.WaitFor(t, c, tenant, id, last(evs).State)
		rec, err := c.Status(t.Context(), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		return last(evs), rec, evs
	}
	for _, name := range []string{"limited", "revoked"} {
		st, rec, evs := run(name)
		if st.State != wire.StateSucceeded || st.Profile != "answers" || st.Pin == nil || st.Pin.Model != "gpt-5.2" {
			t.Fatalf("%s: terminal = %+v pin %+v, want succeeded on answers (%s)", name, st, st.Pin, describe(evs))
		}
		if rec.Profile != "answers" || rec.Pin == nil || rec.Pin.Model != "gpt-5.2" {
			t.Fatalf("%s: record names %s pin %+v, want answers and gpt-5.2", name, rec.Profile, rec.Pin)
		}
	}
	st, rec, evs := run("refused")
	if st.State != wire.StateFailed || st.Profile != "refused" || rec.Profile != "refused" || errors.Is(st.Error, wire.ProviderQuotaError) {
		t.Fatalf("400: terminal = %+v, record names %s, want failed on refused (%s)", st, rec.Profile, describe(evs))
	}
	// Each failing profile was asked once, and the fallback once per move.
	got := map[string]int{}
	for _, r := range srv.Requests() {
		got[r.Case]++
	}
	if want := map[string]int{"http-429": 1, "http-401": 1, "http-400-context": 1, "text": 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests by recorded case = %v, want %v", got, want)
	}
}
