package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go"
)

func TestConnectUsesTheTenantsInbox(t *testing.T) {
	s := natstest.RunJetStream(t)
	nc, err := client.Connect(s.ClientURL(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.NewRespInbox(); !strings.HasPrefix(got, "_INBOX_acme.") {
		t.Fatalf("inbox %q, want under _INBOX_acme.", got)
	}
	// An explicit prefix in the options wins.
	nc2, err := client.Connect(s.ClientURL(), "acme", nats.CustomInboxPrefix("_INBOX_ops"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	if got := nc2.NewInbox(); !strings.HasPrefix(got, "_INBOX_ops.") {
		t.Fatalf("inbox %q, want under _INBOX_ops.", got)
	}
	if _, err := client.Connect(s.ClientURL(), "ac.me"); err == nil || !strings.Contains(err.Error(), "tenant") {
		t.Fatalf("tenant with a dot: %v, want an error naming the tenant", err)
	}
}

func TestWithAPIPrefix(t *testing.T) {
	s := natstest.RunJetStream(t)
	nc, _ := natstest.Connect(t, s)
	for _, bad := range []string{"$JS.*.API", "$JS.>", "$JS..API", ".API", "$JS. API"} {
		if _, err := client.New(nc, subject.Names{}, client.WithAPIPrefix(bad)); !errors.Is(err, client.ErrInvalidOption) {
			t.Errorf("prefix %q: %v, want ErrInvalidOption", bad, err)
		}
	}
	// Status asks under the prefix: answer there as JetStream would for
	// a key that does not exist.
	sub, err := nc.Subscribe("$JS.mesh.API.DIRECT.GET.>", func(m *nats.Msg) {
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set("Status", "404")
		reply.Header.Set("Description", "Message Not Found")
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	c, err := client.New(nc, subject.Names{}, client.WithAPIPrefix("$JS.mesh.API."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Status(ctx, "acme", "r1"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("status under $JS.mesh.API: %v, want ErrNotFound", err)
	}
}
