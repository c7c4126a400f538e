package service_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// A service started before its server waits for it, saying so, and
// starts once it is up; one stopped while it waits returns ctx's error.
func TestStartWaitsForTheServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := service.Config{NatsURL: fmt.Sprintf("nats://u:secret-pw@127.0.0.1:%d", port), Prefix: "t1", ShutdownTimeout: 5 * time.Second}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := service.Start(ctx, "test", cfg, slog.New(slog.DiscardHandler)); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nats.ErrNoServers) {
		t.Fatalf("Start with no server until its context ended = %v, want the context's error and the last attempt's", err)
	}

	var logs servicetest.Buffer
	type started struct {
		infra *service.Infra
		err   error
	}
	done := make(chan started, 1)
	go func() {
		i, err := service.Start(context.Background(), "test", cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
		done <- started{i, err}
	}()
	natstest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), `"msg":"waiting for the NATS server","url":"nats://[REDACTED]@127.0.0.1:`) {
			return errors.New("no wait logged yet")
		}
		return nil
	})
	natstest.RunJetStreamWith(t, func(o *server.Options) { o.Port, o.Username, o.Password = port, "u", "secret-pw" })
	var st started
	select {
	case st = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Start still waits 20 s after the server started")
	}
	if st.err != nil {
		t.Fatal(st.err)
	}
	defer st.infra.Close()
	if _, err := st.infra.Deps.JS.Stream(context.Background(), st.infra.Deps.Names.SubmitStream()); err != nil {
		t.Errorf("topology not ensured: %v", err)
	}
	if strings.Contains(logs.String(), "secret-pw") || strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("logged a password or an error:\n%s", logs.String())
	}
}

// Credentials refused are not waited for: Start fails at once.
func TestStartFailsAtOnceOnRefusedCredentials(t *testing.T) {
	s := natstest.RunJetStreamWith(t, func(o *server.Options) { o.Username, o.Password = "u", "right" })
	url := strings.Replace(s.ClientURL(), "nats://", "nats://u:wrong@", 1)
	start := time.Now()
	_, err := service.Start(context.Background(), "test", service.Config{NatsURL: url, ShutdownTimeout: time.Second}, slog.New(slog.DiscardHandler))
	if !errors.Is(err, nats.ErrAuthorization) || time.Since(start) > 5*time.Second {
		t.Fatalf("Start = %v after %s, want the authorization violation at once", err, time.Since(start))
	}
}
