package jsretry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestNotYet(t *testing.T) {
	tests := []struct {
		name string
		in   error
		want bool
	}{
		{name: "no responders", in: nats.ErrNoResponders, want: true},
		{name: "request timeout", in: fmt.Errorf("ensure stream X: %w", context.DeadlineExceeded), want: true},
		{name: "temporarily unavailable", in: &jetstream.APIError{Code: 503, ErrorCode: 10008}, want: true},
		{name: "stream not found after a restart", in: &jetstream.APIError{Code: 404, ErrorCode: 10059}, want: true},
		{name: "stream not found", in: fmt.Errorf("open stream: %w", jetstream.ErrStreamNotFound), want: true},
		{name: "bucket not found", in: jetstream.ErrBucketNotFound, want: true},
		{name: "consumer not found", in: jetstream.ErrConsumerNotFound, want: true},
		{name: "jetstream not enabled", in: jetstream.ErrJetStreamNotEnabled, want: true},
		{name: "jetstream not enabled for account", in: jetstream.ErrJetStreamNotEnabledForAccount, want: true},
		{name: "insufficient resources", in: &jetstream.APIError{Code: 503, ErrorCode: 10023}, want: true},
		{name: "no suitable peers", in: &jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement"}, want: true},
		{name: "stream exists with another config", in: jetstream.ErrStreamNameAlreadyInUse, want: false},
		{name: "invalid config", in: &jetstream.APIError{Code: 400, ErrorCode: 10052, Description: "invalid stream config"}, want: false},
		{name: "replicas without a cluster", in: &jetstream.APIError{Code: 500, ErrorCode: 10074}, want: false},
		{name: "permission", in: nats.ErrPermissionViolation, want: false},
		{name: "cancelled", in: context.Canceled, want: false},
		{name: "other", in: errors.New("boom"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jsretry.NotYet(tt.in); got != tt.want {
				t.Errorf("NotYet(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestAwaitWaitsAndLogsIt(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	n := 0
	v, err := jsretry.Await(context.Background(), nil, log, "topology", func(ctx context.Context) (string, error) {
		if _, ok := ctx.Deadline(); ok {
			t.Error("an attempt has a deadline of Await's: its requests keep their own")
		}
		n++
		switch n {
		case 1:
			return "", nats.ErrNoResponders
		case 2:
			return "", &jetstream.APIError{Code: 404, ErrorCode: 10059, Description: "stream not found"}
		}
		return "ensured", nil
	})
	if v != "ensured" || err != nil || n != 3 {
		t.Fatalf("Await = %q, %v after %d attempts; want ensured after 3", v, err, n)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	// The second error comes within WaitLogEvery of the first: one line
	// for the wait, one for its end.
	if len(lines) != 2 ||
		!strings.Contains(lines[0], `"level":"INFO","msg":"waiting for JetStream","for":"topology"`) || !strings.Contains(lines[0], `"err":"nats: no responders available for request"`) ||
		!strings.Contains(lines[1], `"level":"INFO","msg":"waiting for JetStream: done","for":"topology"`) {
		t.Errorf("logged:\n%s\nwant a waiting line with the error, then its end", logs.String())
	}
}

func TestAwaitFailsAtOnceOnAConfigError(t *testing.T) {
	var logs bytes.Buffer
	n := 0
	_, err := jsretry.Await(context.Background(), nil, slog.New(slog.NewJSONHandler(&logs, nil)), "topology", func(context.Context) (int, error) {
		n++
		return 0, jetstream.ErrStreamNameAlreadyInUse
	})
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) || n != 1 || logs.Len() != 0 {
		t.Errorf("Await = %v after %d attempts, logged %q; want the typed error at once, nothing logged", err, n, logs.String())
	}
}

func TestAwaitEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := jsretry.Await(ctx, nil, nil, "topology", func(context.Context) (int, error) {
		return 0, &jetstream.APIError{Code: 503, ErrorCode: 10008}
	})
	var apiErr *jetstream.APIError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &apiErr) || apiErr.ErrorCode != 10008 {
		t.Errorf("Await = %v, want the deadline and the last attempt's error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Await returned %s after its context ended", d-300*time.Millisecond)
	}
}
