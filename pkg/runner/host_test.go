package runner_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/runner"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A runner hosting a CLI adapter refuses an ack wait or lease TTL that is
// not above the CLI's teardown (kill grace plus stderr drain), naming the
// variable; an in-process adapter tears down at once and takes the minimum.
func TestRunnerRefusesTimersShorterThanTheTeardown(t *testing.T) {
	cli, err := claudecode.New(cli.Config{Binary: "claude", InstallHint: "-", Grace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fx, err := fixture.New(fixture.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		served   adapter.Adapter
		ackWait  time.Duration
		leaseTTL time.Duration
		wantErr  []string // variables named; none: accepted
	}{
		{"cli, both too short", cli, 9 * time.Second, 9 * time.Second, []string{"AGENTMESH_RUNNER_ACK_WAIT", "AGENTMESH_LEASE_TTL"}},
		{"cli, ack wait too short", cli, 5 * time.Second, 30 * time.Second, []string{"AGENTMESH_RUNNER_ACK_WAIT"}},
		{"cli, lease too short", cli, 30 * time.Second, 3 * time.Second, []string{"AGENTMESH_LEASE_TTL"}},
		{"cli, just above", cli, 9*time.Second + time.Millisecond, 10 * time.Second, nil},
		{"in process, the minimums", fx, time.Second, time.Second, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := natstest.RunJetStream(t)
			nc, js := natstest.Connect(t, srv)
			ctx := context.Background()
			if err := topology.Ensure(ctx, js, topology.Config{LeaseTTL: tt.leaseTTL}); err != nil {
				t.Fatal(err)
			}
			reg, err := adapter.NewRegistry(tt.served)
			if err != nil {
				t.Fatal(err)
			}
			d := service.Deps{NC: nc, JS: js, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
			_, err = runner.New(ctx, d, reg, runner.Config{AckWait: tt.ackWait})
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, runner.ErrInvalidConfig) {
				t.Fatalf("New: %v, want ErrInvalidConfig", err)
			}
			for _, v := range tt.wantErr {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("error %q does not name %s", err, v)
				}
			}
			for _, v := range []string{"AGENTMESH_RUNNER_ACK_WAIT", "AGENTMESH_LEASE_TTL"} {
				named := strings.Contains(err.Error(), v)
				want := strings.Contains(strings.Join(tt.wantErr, " "), v)
				if named != want {
					t.Errorf("error %q: names %s = %t, want %t", err, v, named, want)
				}
			}
		})
	}
}
