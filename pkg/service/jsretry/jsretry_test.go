package jsretry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTransient(t *testing.T) {
	tests := []struct {
		name string
		in   error
		want bool
	}{
		{name: "no responders", in: nats.ErrNoResponders, want: true},
		{name: "no stream response", in: fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse), want: true},
		{name: "timeout", in: nats.ErrTimeout, want: true},
		{name: "attempt deadline", in: context.DeadlineExceeded, want: true},
		{name: "async ack timeout", in: jetstream.ErrAsyncPublishTimeout, want: true},
		{name: "reconnecting", in: nats.ErrConnectionReconnecting, want: true},
		{name: "503 temporarily unavailable", in: fmt.Errorf("nats: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008}), want: true},
		{name: "not the leader", in: &jetstream.APIError{Code: 500, ErrorCode: 10009}, want: true},
		{name: "last sequence not ready", in: &jetstream.APIError{Code: 503, ErrorCode: 10163}, want: true},
		{name: "same msg id in process", in: &jetstream.APIError{Code: 409, ErrorCode: jsretry.ErrCodeMsgIDInProcess}, want: true},
		{name: "wrong last sequence", in: &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, want: false},
		{name: "message too big", in: jetstream.ErrStreamMessageExceedsMaximum, want: false},
		{name: "cancelled", in: context.Canceled, want: false},
		{name: "permission", in: nats.ErrPermissionViolation, want: false},
		{name: "other", in: errors.New("boom"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jsretry.Transient(tt.in); got != tt.want {
				t.Errorf("Transient(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDoStopsAtAPermanentError(t *testing.T) {
	n := 0
	_, err := jsretry.Do(context.Background(), func(context.Context) (int, error) {
		n++
		if n < 3 {
			return 0, nats.ErrNoResponders
		}
		return 0, jetstream.ErrStreamNotFound
	})
	if !errors.Is(err, jetstream.ErrStreamNotFound) || n != 3 {
		t.Errorf("Do = %v after %d attempts, want ErrStreamNotFound after 3", err, n)
	}
}

func TestDoEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	n := 0
	start := time.Now()
	_, err := jsretry.Do(ctx, func(actx context.Context) (int, error) {
		n++
		if _, ok := actx.Deadline(); !ok {
			t.Error("attempt without a deadline")
		}
		return 0, nats.ErrNoResponders
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("Do = %v, want the deadline and the last attempt's error", err)
	}
	if d := time.Since(start); d > time.Second || n < 3 {
		t.Errorf("Do returned after %s and %d attempts, want several attempts and soon after 200ms", d, n)
	}
}

// A request made again while a leader election lasts.
func ExampleDo() {
	attempts := 0
	v, err := jsretry.Do(context.Background(), func(ctx context.Context) (string, error) {
		attempts++
		if attempts < 3 {
			return "", nats.ErrNoResponders // no stream leader yet
		}
		return "stored", nil
	})
	fmt.Println(v, err, attempts)
	// Output: stored <nil> 3
}
