package runner

import (
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// TestBackoff checks the exponential backoff with equal jitter against
// injected random sources: the least draw (0) gives half the step, the
// greatest (n-1) the whole step, and the step doubles per attempt up to
// backoffCeiling.
func TestBackoff(t *testing.T) {
	least := func(int64) int64 { return 0 }
	most := func(n int64) int64 { return n - 1 }
	var asked []int64
	recorded := func(n int64) int64 { asked = append(asked, n); return n / 3 }
	tests := []struct {
		name    string
		attempt int
		base    time.Duration
		rnd     func(int64) int64
		want    time.Duration
	}{
		{name: "first, least", attempt: 1, base: 250 * time.Millisecond, rnd: least, want: 125 * time.Millisecond},
		{name: "first, most", attempt: 1, base: 250 * time.Millisecond, rnd: most, want: 250 * time.Millisecond},
		{name: "second, least", attempt: 2, base: 250 * time.Millisecond, rnd: least, want: 250 * time.Millisecond},
		{name: "second, most", attempt: 2, base: 250 * time.Millisecond, rnd: most, want: 500 * time.Millisecond},
		{name: "fourth, most", attempt: 4, base: 250 * time.Millisecond, rnd: most, want: 2 * time.Second},
		{name: "capped, least", attempt: 12, base: 250 * time.Millisecond, rnd: least, want: backoffCeiling / 2},
		{name: "capped, most", attempt: 12, base: 250 * time.Millisecond, rnd: most, want: backoffCeiling},
		{name: "huge attempt stays capped", attempt: 1 << 20, base: time.Second, rnd: most, want: backoffCeiling},
		{name: "base above the ceiling", attempt: 1, base: time.Hour, rnd: most, want: backoffCeiling},
		{name: "odd nanoseconds", attempt: 1, base: 3, rnd: most, want: 3},
		{name: "no base", attempt: 3, base: 0, rnd: most, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoff(tt.attempt, tt.base, tt.rnd); got != tt.want {
				t.Errorf("backoff(%d, %s) = %s, want %s", tt.attempt, tt.base, got, tt.want)
			}
		})
	}
	// The random part is drawn over the other half of the step, inclusive.
	if got := backoff(3, 100*time.Millisecond, recorded); len(asked) != 1 || asked[0] != int64(200*time.Millisecond)+1 ||
		got != 200*time.Millisecond+time.Duration(asked[0]/3) {
		t.Errorf("backoff(3, 100ms) = %s drawing over %v, want 200ms plus a third of [0, 200ms]", got, asked)
	}
}

// TestRetryDelay: the provider's Retry-After wins when it is longer than
// the backoff, and the backoff when it is longer than the Retry-After.
func TestRetryDelay(t *testing.T) {
	most := func(n int64) int64 { return n - 1 }
	tests := []struct {
		name    string
		in      *wire.Error
		attempt int
		want    time.Duration
	}{
		{name: "no retry-after", in: &wire.Error{Retryable: true}, attempt: 1, want: 250 * time.Millisecond},
		{name: "retry-after longer", in: &wire.Error{Retryable: true, RetryAfterMS: 1000}, attempt: 1, want: time.Second},
		{name: "backoff longer", in: &wire.Error{Retryable: true, RetryAfterMS: 100}, attempt: 3, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryDelay(tt.in, tt.attempt, 250*time.Millisecond, most); got != tt.want {
				t.Errorf("retryDelay(%+v, %d) = %s, want %s", tt.in, tt.attempt, got, tt.want)
			}
		})
	}
}
