package mesh_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/replay"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestRetriesBeforeFirstOutput is issue 14's acceptance 5, through the
// router and a runner with recorded OpenAI answers on a replay server:
// a 429 with Retry-After: 1 then a success succeeds on attempt 2, its
// second request no sooner than 1 s after the first; a 529 then a
// success succeeds on attempt 2; a 500 is retried with backoff up to
// max_attempts (3); a 401 is tried once; a stream cut after its first
// chunk is not retried; a Retry-After past the run's deadline fails the
// run at once with the provider's quota error, not timed_out.
func TestRetriesBeforeFirstOutput(t *testing.T) {
	t.Setenv("AGENTMESH_TEST_RETRY_KEY", "sk-test-retry-5d1e")
	srv, err := replay.Start("../../testdata/remote/openai")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cases := []string{"retry-after-429", "http-529-then-ok", "http-500", "http-401", "cut", "retry-after-past-deadline"}
	files := map[string]string{}
	for i, c := range cases {
		// One profile per recorded case, each offering its own model (a
		// pin names only provider and model).
		files[c+".yaml"] = fmt.Sprintf("schema: 1\nname: %s\nadapter: openai\ntransport: remote\nmodel: gpt-retry-%d\n"+
			"base_url: %s/%s\nallow_loopback: true\ncredential_env: AGENTMESH_TEST_RETRY_KEY\n"+
			"pricing: {input: \"1.25\", output: \"10\", cache_read: \"0.125\", reasoning: \"10\"}\npolicy: {max_attempts: 3}\n",
			c, i, srv.URL(), c)
	}
	c := profilesMesh(t, files)
	run := func(profile string, deadline time.Duration) (wire.Status, []wire.Event, []replay.Request) {
		t.Helper()
		r := runReq(t, map[string]any{"prompt": "hi"})
		r.Profile, r.DeadlineMS = profile, deadline.Milliseconds()
		_, evs := clienttest.Run(t, c, r)
		checkGapless(t, evs)
		var reqs []replay.Request
		for _, q := range srv.Requests() {
			if q.Case == profile {
				reqs = append(reqs, q)
			}
		}
		return last(evs), evs, reqs
	}

	t.Run("429 with Retry-After then success", func(t *testing.T) {
		st, evs, reqs := run("retry-after-429", 0)
		if st.State != wire.StateSucceeded || st.Attempt != 2 || len(reqs) != 2 {
			t.Fatalf("terminal %+v after %d requests (%s), want succeeded on attempt 2 after 2", st, len(reqs), describe(evs))
		}
		// A lower bound only: the runner waited at least the Retry-After.
		if gap := reqs[1].At.Sub(reqs[0].At); gap < time.Second {
			t.Errorf("the second request came %s after the first, want at least the 1s of Retry-After", gap)
		}
	})
	t.Run("529 then success", func(t *testing.T) {
		st, evs, reqs := run("http-529-then-ok", 0)
		if st.State != wire.StateSucceeded || st.Attempt != 2 || len(reqs) != 2 {
			t.Fatalf("terminal %+v after %d requests (%s), want succeeded on attempt 2 after 2", st, len(reqs), describe(evs))
		}
	})
	t.Run("500 retried with backoff up to max_attempts", func(t *testing.T) {
		st, evs, reqs := run("http-500", 0)
		if st.State != wire.StateFailed || st.Attempt != 3 || len(reqs) != 3 || !errors.Is(st.Error, wire.ProviderError) {
			t.Fatalf("terminal %+v after %d requests (%s), want failed with ProviderError on attempt 3 after 3", st, len(reqs), describe(evs))
		}
		// Lower bounds only: with the runner's default RetryBackoff of
		// 250ms, the n-th wait is at least half of 250ms·2^(n-1).
		for i, least := range []time.Duration{125 * time.Millisecond, 250 * time.Millisecond} {
			if gap := reqs[i+1].At.Sub(reqs[i].At); gap < least {
				t.Errorf("request %d came %s after request %d, want at least %s", i+2, gap, i+1, least)
			}
		}
	})
	t.Run("401 tried once", func(t *testing.T) {
		st, evs, reqs := run("http-401", 0)
		if st.State != wire.StateFailed || st.Attempt != 1 || len(reqs) != 1 || !errors.Is(st.Error, wire.ProviderAuthError) {
			t.Fatalf("terminal %+v after %d requests (%s), want failed with ProviderAuthError on attempt 1 after 1", st, len(reqs), describe(evs))
		}
	})
	t.Run("cut after the first chunk not retried", func(t *testing.T) {
		st, evs, reqs := run("cut", 0)
		if st.State != wire.StateFailed || st.Attempt != 1 || len(reqs) != 1 || !errors.Is(st.Error, wire.ProviderTransportError) {
			t.Fatalf("terminal %+v after %d requests (%s), want failed with ProviderTransportError on attempt 1 after 1", st, len(reqs), describe(evs))
		}
		chunks := 0
		for _, e := range evs {
			if e.Chunk != nil {
				chunks++
			}
		}
		if chunks == 0 {
			t.Errorf("no chunk before the failure (%s): the case must fail after output", describe(evs))
		}
	})
	t.Run("Retry-After past the deadline fails now", func(t *testing.T) {
		st, evs, reqs := run("retry-after-past-deadline", time.Minute)
		if st.State != wire.StateFailed || st.Attempt != 1 || len(reqs) != 1 || !errors.Is(st.Error, wire.ProviderQuotaError) {
			t.Fatalf("terminal %+v after %d requests (%s), want failed with ProviderQuotaError on attempt 1 after 1", st, len(reqs), describe(evs))
		}
		if st.Error.RetryAfterMS != 3600_000 {
			t.Errorf("terminal error's retry_after_ms = %d, want the provider's 3600000", st.Error.RetryAfterMS)
		}
	})
}
