package service

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
)

func TestStartClose(t *testing.T) {
	s := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, s)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := Config{NatsURL: s.ClientURL(), Prefix: "t1", ShutdownTimeout: 5 * time.Second}
	infra, err := Start(context.Background(), "test", cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := infra.HTTPAddr(); got != "" {
		t.Errorf("HTTPAddr() = %q with HTTP disabled, want empty", got)
	}
	if _, err := js.Stream(context.Background(), infra.Deps.Names.SubmitStream()); err != nil {
		t.Errorf("topology not ensured: stream %s: %v", infra.Deps.Names.SubmitStream(), err)
	}
	if err := infra.Deps.Health.Ready(); err == nil {
		t.Error("Ready() = nil before any component added a check, want an error")
	}
	if err := infra.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if !infra.Deps.NC.IsClosed() {
		t.Error("connection open after Close")
	}
	if err := infra.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
}
