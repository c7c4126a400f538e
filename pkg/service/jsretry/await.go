package jsretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StartBackoff is what Await, and a service dialling a server not up yet,
// wait between attempts: 50 ms doubling to 2 s, so a service comes up
// within about two seconds of the cluster being ready, without many
// services' requests hammering a cluster that is still forming.
func StartBackoff() Backoff { return Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second} }

// WaitLogEvery is how often a wait (Await, Waiting) is logged again while
// it lasts.
const WaitLogEvery = 5 * time.Second

// waitWarnAfter is how long a wait is logged at Info; past it, at Warn.
const waitWarnAfter = 30 * time.Second

// NotYet reports whether err means that JetStream is not ready yet for a
// service that starts: the cluster is forming or recovering, or the
// server is not reachable. It is every Transient error and also:
// JetStream not enabled (yet) on the server or for the account; a
// stream, bucket or consumer not found, which right after a cluster's
// restart the servers report until they have recovered their assignments
// (err_code 10059); too few peers or resources to place replicas while
// the cluster's servers are still joining; incomplete results; a change
// of the cluster's membership in progress. A configuration error (an
// invalid or conflicting config, a permission violation, replicas on a
// server without a cluster) is not NotYet.
func NotYet(err error) bool {
	if Transient(err) {
		return true
	}
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrBucketNotFound), errors.Is(err, jetstream.ErrConsumerNotFound),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamNotFound, // 10059
			jetstream.JSErrCodeConsumerNotFound, // 10014
			10004,                               // incomplete results
			10005,                               // no suitable peers for placement
			10023,                               // insufficient resources
			10202:                               // cluster member change in progress
			return true
		}
	}
	return false
}

// Await calls f until it returns nil or an error that is not NotYet, or
// ctx ends, waiting between attempts with a capped exponential backoff
// with jitter (50 ms to 2 s). A request the server's permissions refuse
// gets no answer, only a timeout: when nc (f's connection; nil: none)
// reports a permissions violation, Await returns that at once with the
// attempt's error, instead of waiting. It is how a service starts on a cluster
// that is forming or recovering: what waits is logged as waiting for
// JetStream, for what, with the last error (Waiting), not as a failure.
// f's requests keep their own timeouts: the JetStream API's default of 5 s
// when f's context has no deadline, so give Await a context that is
// cancelled rather than one with a deadline, which would be every
// request's. The error returned when ctx ends
// wraps ctx's error and f's last one. log may be nil: then the wait is not
// logged. It blocks.
func Await[T any](ctx context.Context, nc *nats.Conn, log *slog.Logger, what string, f func(context.Context) (T, error)) (T, error) {
	// The wait counts from the first attempt, which may itself have waited
	// for a request's timeout.
	w := Waiting{Log: log, Msg: "waiting for JetStream", Attrs: []any{"for", what}, start: time.Now()}
	b := StartBackoff()
	for {
		v, err := f(ctx)
		switch {
		case err == nil:
			w.Done()
			return v, nil
		case ctx.Err() != nil:
			if errors.Is(err, ctx.Err()) {
				return v, err
			}
			return v, fmt.Errorf("%w; last attempt: %w", ctx.Err(), err)
		case !NotYet(err):
			return v, err
		case nc != nil && errors.Is(nc.LastError(), nats.ErrPermissionViolation):
			return v, fmt.Errorf("%w (%w)", nc.LastError(), err)
		}
		w.Note(err)
		if werr := b.Wait(ctx); werr != nil {
			return v, fmt.Errorf("%w; last attempt: %w", werr, err)
		}
	}
}

// Waiting logs a wait for something not ready yet: Note logs the first
// error at once and then at most every WaitLogEvery, at Info until the
// wait has lasted 30 s and at Warn after, with Attrs, how long it has
// waited and the error; Done logs the end of a wait that was logged. A nil
// Log logs nothing. The zero value of its unexported state is a wait not
// begun.
type Waiting struct {
	Log   *slog.Logger
	Msg   string // "waiting for JetStream"
	Attrs []any  // key-value pairs: what is waited for

	start, logged time.Time
}

// Note records that the wait goes on, err being why.
func (w *Waiting) Note(err error) {
	now := time.Now()
	if w.start.IsZero() {
		w.start = now
	}
	if w.Log == nil || (!w.logged.IsZero() && now.Sub(w.logged) < WaitLogEvery) {
		return
	}
	w.logged = now
	level, waited := slog.LevelInfo, now.Sub(w.start)
	if waited >= waitWarnAfter {
		level = slog.LevelWarn
	}
	w.Log.Log(context.Background(), level, w.Msg, append(slices.Clone(w.Attrs), "waited", waited.Round(time.Millisecond).String(), "err", err)...)
}

// Done records that the wait is over; it logs "<Msg>: done" if the wait
// was logged.
func (w *Waiting) Done() {
	if w.Log == nil || w.logged.IsZero() {
		return
	}
	w.Log.Info(w.Msg+": done", append(slices.Clone(w.Attrs), "waited", time.Since(w.start).Round(time.Millisecond).String())...)
}
