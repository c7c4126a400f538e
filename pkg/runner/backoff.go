package runner

import (
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// backoffCeiling bounds the exponential backoff between two attempts.
const backoffCeiling = 30 * time.Second

// retryDelay is how long the work of a run whose attempt-th attempt
// failed with the retryable we waits before its next attempt: the
// exponential backoff from base (backoff), or the provider's Retry-After
// (we.RetryAfterMS) when that is longer, so a provider's wish is never cut
// short. rnd is the jitter's random source (backoff). It is a pure
// function of its arguments.
func retryDelay(we *wire.Error, attempt int, base time.Duration, rnd func(n int64) int64) time.Duration {
	return max(backoff(attempt, base, rnd), time.Duration(we.RetryAfterMS)*time.Millisecond)
}

// backoff is the wait after the attempt-th failed attempt (1 for the
// first): exponential with equal jitter. The step is base·2^(attempt-1),
// at most backoffCeiling; the wait is half the step plus a random part of
// the other half, rnd(half+1) (rnd(n) returns a value in [0, n), as
// math/rand/v2's Int64N does), so waits spread out (runners retrying
// a provider's outage together do not return together) and still grow.
// A step of 0 or less is no wait.
func backoff(attempt int, base time.Duration, rnd func(n int64) int64) time.Duration {
	step := base
	for i := 1; i < attempt && step < backoffCeiling; i++ {
		step *= 2
	}
	step = min(step, backoffCeiling)
	if step <= 0 {
		return 0
	}
	half := step / 2
	return half + time.Duration(rnd(int64(step-half)+1))
}
