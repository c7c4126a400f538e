package service_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
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
