package consumerproxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// body is a create request as nats.go's jetstream sends it.
func body(t *testing.T, stream string, cfg any, action string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"stream_name": stream, "config": cfg, "action": action})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ordered is the config of the first consumer jetstream.OrderedConsumer
// creates, filtered to one run.
func ordered(name, filter string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Name: name, DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy,
		InactiveThreshold: 5 * time.Minute, Replicas: 1, MemoryStorage: true, FilterSubject: filter,
	}
}

func TestValidate(t *testing.T) {
	n := subject.Names{}
	const own = "agentmesh.events.acme.r1"
	create := n.ConsumerCreateProxy("acme", "c1", own)
	with := func(f func(*jetstream.ConsumerConfig)) jetstream.ConsumerConfig {
		c := ordered("c1", own)
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name    string
		names   subject.Names
		subj    string
		body    []byte
		target  string // forwarded to, when accepted
		errCode uint16 // refused with, otherwise
		reason  string // in the refusal's description
	}{
		{name: "ordered consumer on one run", subj: create, body: body(t, "AGENTMESH_EVENTS", ordered("c1", own), ""),
			target: "$JS.API.CONSUMER.CREATE.AGENTMESH_EVENTS.c1.agentmesh.events.acme.r1"},
		{name: "pull consumer on all own events, action create", subj: n.ConsumerCreateProxy("acme", "c1", "agentmesh.events.acme.>"),
			body:   body(t, "AGENTMESH_EVENTS", ordered("c1", "agentmesh.events.acme.>"), "create"),
			target: "$JS.API.CONSUMER.CREATE.AGENTMESH_EVENTS.c1.agentmesh.events.acme.>"},
		{name: "prefixed deployment", names: subject.Names{Prefix: "p"},
			subj:   "p.agentmesh.consumers.acme.create.c1.p.agentmesh.events.acme.r1",
			body:   body(t, "p_AGENTMESH_EVENTS", ordered("c1", "p.agentmesh.events.acme.r1"), ""),
			target: "$JS.API.CONSUMER.CREATE.p_AGENTMESH_EVENTS.c1.p.agentmesh.events.acme.r1"},
		{name: "push to another tenant's submit", subj: create, body: body(t, "AGENTMESH_EVENTS", with(func(c *jetstream.ConsumerConfig) {
			c.DeliverSubject = "agentmesh.submit.beta"
		}), ""), errCode: ErrCodeInvalidDeliverSubject, reason: "push consumers are not allowed"},
		{name: "push to a runner's cancel", subj: create, body: body(t, "AGENTMESH_EVENTS", with(func(c *jetstream.ConsumerConfig) {
			c.DeliverSubject = "agentmesh.runner.r.cancel"
		}), "create"), errCode: ErrCodeInvalidDeliverSubject, reason: "push consumers are not allowed"},
		{name: "push key in other case", subj: create,
			body:    []byte(`{"stream_name":"AGENTMESH_EVENTS","config":{"name":"c1","filter_subject":"agentmesh.events.acme.r1","DELIVER_SUBJECT":"agentmesh.runner.r.cancel"}}`),
			errCode: ErrCodeInvalidDeliverSubject, reason: "push consumers"},
		{name: "headers only (an ordered consumer option)", subj: create, body: body(t, "AGENTMESH_EVENTS", with(func(c *jetstream.ConsumerConfig) {
			c.HeadersOnly = true
		}), ""), target: "$JS.API.CONSUMER.CREATE.AGENTMESH_EVENTS.c1.agentmesh.events.acme.r1"},
		{name: "deliver group", subj: create,
			body:    []byte(`{"stream_name":"AGENTMESH_EVENTS","config":{"name":"c1","filter_subject":"agentmesh.events.acme.r1","deliver_group":"g"}}`),
			errCode: ErrCodeInvalidDeliverSubject, reason: "push consumers"},
		{name: "idle heartbeat", subj: create,
			body:    []byte(`{"stream_name":"AGENTMESH_EVENTS","config":{"name":"c1","filter_subject":"agentmesh.events.acme.r1","idle_heartbeat":100000000}}`),
			errCode: ErrCodeInvalidDeliverSubject, reason: "push consumers"},
		{name: "durable", subj: create, body: body(t, "AGENTMESH_EVENTS", with(func(c *jetstream.ConsumerConfig) {
			c.Durable = "c1"
		}), ""), errCode: ErrCodeBadRequest, reason: "durable consumers are not allowed"},
		{name: "another tenant's events", subj: n.ConsumerCreateProxy("acme", "c1", "agentmesh.events.beta.r1"),
			body: body(t, "AGENTMESH_EVENTS", ordered("c1", "agentmesh.events.beta.r1"), ""), errCode: ErrCodeBadRequest, reason: "outside the tenant's events"},
		{name: "wildcard tenant", subj: n.ConsumerCreateProxy("acme", "c1", "agentmesh.events.*.r1"),
			body: body(t, "AGENTMESH_EVENTS", ordered("c1", "agentmesh.events.*.r1"), ""), errCode: ErrCodeBadRequest, reason: "outside the tenant's events"},
		{name: "every event", subj: n.ConsumerCreateProxy("acme", "c1", "agentmesh.>"),
			body: body(t, "AGENTMESH_EVENTS", ordered("c1", "agentmesh.>"), ""), errCode: ErrCodeBadRequest, reason: "outside the tenant's events"},
		{name: "tenant name as a prefix", subj: n.ConsumerCreateProxy("acme", "c1", "agentmesh.events.acmex.r1"),
			body: body(t, "AGENTMESH_EVENTS", ordered("c1", "agentmesh.events.acmex.r1"), ""), errCode: ErrCodeBadRequest, reason: "outside the tenant's events"},
		{name: "tenant's events token alone", subj: n.ConsumerCreateProxy("acme", "c1", "agentmesh.events.acme"),
			body: body(t, "AGENTMESH_EVENTS", ordered("c1", "agentmesh.events.acme"), ""), errCode: ErrCodeBadRequest, reason: "outside the tenant's events"},
		{name: "wildcard tenant in the subject", subj: n.ConsumerCreateProxy("*", "c1", "agentmesh.events.*.r1"),
			body: body(t, "AGENTMESH_EVENTS", ordered("c1", "agentmesh.events.*.r1"), ""), errCode: ErrCodeBadRequest, reason: "invalid token"},
		{name: "body filter differs from the subject's", subj: create, body: body(t, "AGENTMESH_EVENTS", ordered("c1", "agentmesh.events.beta.>"), ""),
			errCode: ErrCodeBadRequest, reason: "differs from the subject's filter"},
		{name: "several filters", subj: create, body: body(t, "AGENTMESH_EVENTS", with(func(c *jetstream.ConsumerConfig) {
			c.FilterSubject = ""
			c.FilterSubjects = []string{own, "agentmesh.events.beta.>"}
		}), ""), errCode: ErrCodeBadRequest, reason: "several filter subjects"},
		{name: "no filter in the body", subj: create, body: body(t, "AGENTMESH_EVENTS", ordered("c1", ""), ""),
			errCode: ErrCodeBadRequest, reason: "differs from the subject's filter"},
		{name: "name differs from the subject's", subj: create, body: body(t, "AGENTMESH_EVENTS", ordered("other", own), ""),
			errCode: ErrCodeBadRequest, reason: "differs from the consumer name"},
		{name: "update", subj: create, body: body(t, "AGENTMESH_EVENTS", ordered("c1", own), "update"),
			errCode: ErrCodeBadRequest, reason: "may only be created"},
		{name: "another stream", subj: create, body: body(t, "AGENTMESH_SUBMIT", ordered("c1", own), ""),
			errCode: ErrCodeBadRequest, reason: "stream_name"},
		{name: "direct", subj: create,
			body:    []byte(`{"stream_name":"AGENTMESH_EVENTS","config":{"name":"c1","filter_subject":"agentmesh.events.acme.r1","direct":true}}`),
			errCode: ErrCodeBadRequest, reason: "direct"},
		{name: "no config", subj: create, body: []byte(`{"stream_name":"AGENTMESH_EVENTS"}`), errCode: ErrCodeBadRequest, reason: "config is required"},
		{name: "not JSON", subj: create, body: []byte(`stream_name=AGENTMESH_EVENTS`), errCode: ErrCodeInvalidJSON, reason: "invalid JSON"},
		{name: "not a create subject", subj: "agentmesh.consumers.acme.delete.c1.agentmesh.events.acme.r1",
			body: body(t, "AGENTMESH_EVENTS", ordered("c1", own), ""), errCode: ErrCodeBadRequest, reason: "not a consumer create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, refusal := Validate(tc.names, tc.subj, tc.body)
			if tc.target != "" {
				if refusal != nil || target != tc.target {
					t.Fatalf("Validate = %q, %v; want %q", target, refusal, tc.target)
				}
				return
			}
			if refusal == nil {
				t.Fatalf("Validate accepted it (forward to %q), want err_code %d", target, tc.errCode)
			}
			if refusal.ErrCode != tc.errCode || refusal.Code != 400 || !strings.Contains(refusal.Description, tc.reason) {
				t.Fatalf("refusal = %+v, want 400/%d with %q", refusal, tc.errCode, tc.reason)
			}
			var resp struct {
				Type  string              `json:"type"`
				Error *jetstream.APIError `json:"error"`
			}
			if err := json.Unmarshal(refusal.Response(), &resp); err != nil {
				t.Fatal(err)
			}
			if resp.Type != "io.nats.jetstream.api.v1.consumer_create_response" || resp.Error == nil ||
				uint16(resp.Error.ErrorCode) != tc.errCode || resp.Error.Description != refusal.Description {
				t.Fatalf("response %s", refusal.Response())
			}
		})
	}
}

// TestProxyForwardsAndRefuses runs the proxy as a service endpoint and asks
// it as a tenant's import would: an accepted create reaches JetStream and
// its reply comes back as JetStream sent it, a refused one creates nothing.
func TestProxyForwardsAndRefuses(t *testing.T) {
	s := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := subject.Names{}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: n.EventsStream(), Subjects: []string{n.EventsAll()}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	p, err := New(nc, n, slog.New(slog.NewTextHandler(io.Discard, nil)), Config{Timeout: 2 * time.Second, MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	svc, err := service.Register(nc, "proxytest", "consumer proxy under test", nil,
		service.Endpoint{Name: "consumer-create", Subject: p.Subject(), Handler: p.Handler(sctx, &wg)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Stop() }()

	ask := func(subj string, b []byte) []byte {
		t.Helper()
		msg, err := nc.RequestWithContext(ctx, subj, b)
		if err != nil {
			t.Fatalf("request %s: %v", subj, err)
		}
		return msg.Data
	}
	type createResponse struct {
		Type   string                    `json:"type"`
		Error  *jetstream.APIError       `json:"error"`
		Name   string                    `json:"name"`
		Config *jetstream.ConsumerConfig `json:"config"`
	}
	decode := func(b []byte) createResponse {
		t.Helper()
		var r createResponse
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return r
	}

	const filter = "agentmesh.events.acme.r1"
	got := decode(ask(n.ConsumerCreateProxy("acme", "good", filter), body(t, n.EventsStream(), ordered("good", filter), "")))
	if got.Error != nil || got.Name != "good" || got.Config == nil || got.Config.FilterSubject != filter {
		t.Fatalf("ordered consumer create = %+v", got)
	}
	if _, err := js.Consumer(ctx, n.EventsStream(), "good"); err != nil {
		t.Fatalf("forwarded consumer: %v", err)
	}

	// JetStream's own refusal is relayed as it came: a second create of
	// the same name with another config.
	again := ordered("good", filter)
	again.DeliverPolicy = jetstream.DeliverNewPolicy
	got = decode(ask(n.ConsumerCreateProxy("acme", "good", filter), body(t, n.EventsStream(), again, "create")))
	if got.Error == nil || got.Error.ErrorCode != jetstream.JSErrCodeConsumerExists {
		t.Fatalf("create of an existing name = %+v, want JetStream's consumer-exists error", got)
	}

	push := ordered("push", filter)
	push.DeliverSubject = "agentmesh.runner.r.cancel"
	got = decode(ask(n.ConsumerCreateProxy("acme", "push", filter), body(t, n.EventsStream(), push, "")))
	if got.Error == nil || uint16(got.Error.ErrorCode) != ErrCodeInvalidDeliverSubject {
		t.Fatalf("push consumer create = %+v", got)
	}
	if _, err := js.Consumer(ctx, n.EventsStream(), "push"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("refused push consumer exists: %v", err)
	}

	// Every slot taken: answered at once, not queued.
	for range cap(p.slots) {
		p.slots <- struct{}{}
	}
	got = decode(ask(n.ConsumerCreateProxy("acme", "busy", filter), body(t, n.EventsStream(), ordered("busy", filter), "")))
	if got.Error == nil || got.Error.Code != 503 || !strings.Contains(got.Error.Description, "too many") {
		t.Fatalf("create with every slot taken = %+v, want a 503", got)
	}
	for range cap(p.slots) {
		<-p.slots
	}

	// A forward that cannot complete (here: the service is stopping) is
	// answered with JetStream's "temporarily unavailable", not left to
	// the client's timeout.
	stop()
	got = decode(ask(n.ConsumerCreateProxy("acme", "late", filter), body(t, n.EventsStream(), ordered("late", filter), "")))
	if got.Error == nil || got.Error.Code != 503 || uint16(got.Error.ErrorCode) != ErrCodeClusterUnavailable {
		t.Fatalf("create while stopping = %+v, want a 503", got)
	}
}
