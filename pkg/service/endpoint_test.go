package service_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// An endpoint handles requests only: what a push consumer delivers into
// its subject (a $JS.ACK reply, or a heartbeat with a Status header and no
// reply) and a plain publish without a reply never reach the handler.
func TestEndpointsHandleOnlyRequests(t *testing.T) {
	srv := natstest.RunJetStream(t)
	nc, _ := natstest.Connect(t, srv)
	var handled atomic.Int32
	svc, err := service.Register(nc, "probe", "test", nil, service.Endpoint{Name: "x", Subject: "probe.x",
		Handler: micro.HandlerFunc(func(req micro.Request) { handled.Add(1); _ = req.Respond([]byte("ok")) })})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Stop() }()
	send := func(reply string, hdr nats.Header) {
		msg := &nats.Msg{Subject: "probe.x", Reply: reply, Header: hdr}
		if err := nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}
	send("", nil)
	send("$JS.ACK.AGENTMESH_EVENTS.c.1.1.1.1.0", nil)
	send("", nats.Header{"Status": []string{"100"}, "Description": []string{"Idle Heartbeat"}})
	send("_INBOX.x", nats.Header{"Status": []string{"100"}})
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request("probe.x", nil, 5*time.Second); err != nil {
		t.Fatalf("a real request: %v", err)
	}
	if n := handled.Load(); n != 1 {
		t.Fatalf("handled %d messages, want only the request", n)
	}
}

// TestReplyErrors: an error answer carries the Nats-Service-Error headers,
// its Content-Type and its body; answered before the handler returns, micro counts it; the
// tally's counts are the data of every endpoint's stats.
func TestReplyErrors(t *testing.T) {
	srv := natstest.RunJetStream(t)
	nc, _ := natstest.Connect(t, srv)
	var tally service.Tally
	tally.Seen("handled")
	var wg sync.WaitGroup
	defer wg.Wait()
	werr := wire.Errorf(wire.AgenticRequestValidationError, "no run r1")
	svc, err := service.RegisterCounting(nc, "probe", "test", nil, &tally,
		service.Endpoint{Name: "now", Subject: "probe.now", Handler: micro.HandlerFunc(func(req micro.Request) {
			tally.Add("handled", 1)
			_ = service.Reply(req, wire.TextContentType, []byte("body"), werr)
		})},
		service.Endpoint{Name: "later", Subject: "probe.later", Handler: micro.HandlerFunc(func(req micro.Request) {
			wg.Go(func() {
				_ = service.ReplyLater(req, wire.TextContentType, []byte("body"), wire.Errorf(wire.ProviderTransportError, "down").Retry())
			})
		})},
		service.Endpoint{Name: "ok", Subject: "probe.ok", Handler: micro.HandlerFunc(func(req micro.Request) {
			_ = service.Reply(req, wire.TextContentType, []byte("fine"), nil)
		})})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Stop() }()
	for _, tt := range []struct{ subj, body, code, text string }{
		{"probe.now", "body", "400", "AgenticRequestValidationError: no run r1"},
		{"probe.later", "body", "503", "ProviderTransportError: down"},
		{"probe.ok", "fine", "", ""},
	} {
		msg, err := nc.Request(tt.subj, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(msg.Data) != tt.body || msg.Header.Get(micro.ErrorCodeHeader) != tt.code || msg.Header.Get(micro.ErrorHeader) != tt.text ||
			msg.Header.Get(wire.ContentTypeHeader) != wire.TextContentType.String() {
			t.Errorf("%s: body %q, headers %v; want %q, code %q, error %q", tt.subj, msg.Data, msg.Header, tt.body, tt.code, tt.text)
		}
	}
	// micro counts a request once its handler returned, after it answered.
	natstest.Eventually(t, 5*time.Second, func() error {
		for _, e := range svc.Stats().Endpoints {
			var data map[string]uint64
			if err := json.Unmarshal(e.Data, &data); err != nil || data["handled"] != 1 {
				return fmt.Errorf("endpoint %s data %s (%v), want handled 1", e.Name, e.Data, err)
			}
			if want := map[string]int{"now": 1}[e.Name]; e.NumRequests != 1 || e.NumErrors != want {
				return fmt.Errorf("endpoint %s: %d requests, %d errors, want 1 and %d", e.Name, e.NumRequests, e.NumErrors, want)
			}
		}
		return nil
	})
}

func TestErrorCode(t *testing.T) {
	for _, tt := range []struct {
		in   *wire.Error
		want string
	}{
		{wire.Errorf(wire.AgenticRequestValidationError, "x"), "400"},
		{wire.Errorf(wire.ProfileError, "x"), "400"},
		{wire.Errorf(wire.AdmissionRejected, "x"), "429"},
		{wire.Errorf(wire.AgenticOperationUnsupported, "x"), "501"},
		{wire.Errorf(wire.ProviderTransportError, "x").Retry(), "503"},
		{wire.Errorf(wire.ProviderProtocolError, "x"), "502"},
		{wire.Errorf(wire.AgenticHandlerError, "x"), "500"},
	} {
		if got := service.ErrorCode(tt.in); got != tt.want {
			t.Errorf("ErrorCode(%s) = %s, want %s", tt.in.Class, got, tt.want)
		}
	}
}
