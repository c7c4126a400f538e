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
// the record name the second profile and its pin. A 429 retried until its
// attempts are used up moves too, a 503 through a 529 in a chain of two
// fallbacks, and the recorded 401; a 400 does not.
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
		"limited.yaml":     profile("limited", "gpt-5.5", "http-429", "policy: {max_attempts: 1, fallback: [answers]}\n"),
		"revoked.yaml":     profile("revoked", "gpt-5.4", "http-401", "policy: {max_attempts: 1, fallback: [answers]}\n"),
		"refused.yaml":     profile("refused", "gpt-5.4-mini", "http-400-context", "policy: {max_attempts: 1, fallback: [answers]}\n"),
		"retried.yaml":     profile("retried", "gpt-5.1", "http-429", "policy: {max_attempts: 2, fallback: [answers]}\n"),
		"unavailable.yaml": profile("unavailable", "gpt-5", "http-503", "policy: {max_attempts: 1, fallback: [overloaded, answers]}\n"),
		"overloaded.yaml":  profile("overloaded", "gpt-4.1", "http-529", "policy: {max_attempts: 1}\n"),
		"answers.yaml":     profile("answers", "gpt-5.2", "text", ""),
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
	for _, name := range []string{"limited", "revoked", "retried", "unavailable"} {
		st, rec, evs := run(name)
		if st.State != wire.StateSucceeded || st.Profile != "answers" || st.Pin == nil || st.Pin.Model != "gpt-5.2" {
			t.Fatalf("%s: terminal = %+v pin %+v, want succeeded on answers (%s)", name, st, st.Pin, describe(evs))
		}
		if rec.Profile != "answers" || rec.Pin == nil || rec.Pin.Model != "gpt-5.2" {
			t.Fatalf("%s: record names %s pin %+v, want answers and gpt-5.2", name, rec.Profile, rec.Pin)
		}
		var route []string
		for _, ev := range evs {
			if ev.Status != nil && ev.Status.State == wire.StateRouted {
				route = append(route, ev.Status.Profile)
			}
		}
		want := []string{name, "answers"}
		if name == "unavailable" {
			want = []string{name, "overloaded", "answers"}
		}
		if fmt.Sprint(route) != fmt.Sprint(want) {
			t.Fatalf("%s: routed to %v, want %v (%s)", name, route, want, describe(evs))
		}
	}
	st, rec, evs := run("refused")
	if st.State != wire.StateFailed || st.Profile != "refused" || rec.Profile != "refused" || errors.Is(st.Error, wire.ProviderQuotaError) {
		t.Fatalf("400: terminal = %+v, record names %s, want failed on refused (%s)", st, rec.Profile, describe(evs))
	}
	// Each failing profile was asked once an attempt, the answering
	// profile once per run moved to it.
	got := map[string]int{}
	for _, r := range srv.Requests() {
		got[r.Case]++
	}
	want := map[string]int{"http-429": 1 + 2, "http-401": 1, "http-400-context": 1, "http-503": 1, "http-529": 1, "text": 4}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests by recorded case = %v, want %v", got, want)
	}
}
