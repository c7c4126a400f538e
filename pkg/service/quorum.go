package service

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultFailoverAfter is how long JetStream may go unanswered on the
// server a connection is on before QuorumWatch moves the connection to
// another server (AGENTMESH_NATS_FAILOVER_AFTER).
const DefaultFailoverAfter = 3 * time.Second

// electingFactor times the threshold is how long JetStream may answer
// nothing but "no leader" before the watch moves: a meta leader election
// takes 4 to 9 s, on every server at once.
const electingFactor = 4

// maxFailoverHold caps the wait between forced reconnects while no
// server answers (a cluster without quorum anywhere).
const maxFailoverHold = 30 * time.Second

// QuorumWatch moves a connection off a server cut off from its
// cluster's majority. Such a server keeps its clients' TCP connections,
// so nats.go never reconnects on its own, but it answers their
// JetStream requests with no responders (a leader across the cut has no
// interest on it any more) or not at all. The watch probes JetStream
// (an account info request, which the meta leader answers) every third
// of its threshold, and the components report what their own JetStream
// calls saw (Report). When either the probes or the reports have failed
// without a success for the threshold, on one server, while the
// connection stays up, it forces a reconnect (when all they got was
// JetStream's "no leader" answer, which every server gives during an
// election, only after four times the threshold): nats.go moves the server
// to the end of its pool and dials the next one. If the next server
// fails the same way, the watch waits twice as long before moving again
// (up to 30 s), so a cluster that has lost quorum everywhere is not
// hammered; a success resets the wait. Every forced reconnect is logged
// and counted in agentmesh_nats_forced_reconnects_total.
//
// A nil *QuorumWatch does nothing; its methods are safe for concurrent
// use.
type QuorumWatch struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	log    *slog.Logger
	m      *Metrics
	after  time.Duration
	ctx    context.Context // ends with Stop
	stop   context.CancelFunc
	done   chan struct{}
	closed chan nats.Status

	mu     sync.Mutex
	server string        // the server id the failures below were seen on
	first  [2]time.Time  // first failure of the current run, by signal; zero: none
	last   [2]time.Time  // its latest failure
	hard   [2]time.Time  // its latest failure that was not an election's (electing)
	errs   [2]error      // and the latest failure's error
	hold   time.Duration // the wait after the next forced reconnect
	until  time.Time     // no forced reconnect before
}

// The two signals a QuorumWatch follows.
const (
	signalProbe  = iota // its own account info requests
	signalReport        // the components' JetStream calls (Report)
)

// ServerCount is the number of servers in url, a comma-separated list as
// nats.Connect takes it.
func ServerCount(url string) int {
	n := 0
	for u := range strings.SplitSeq(url, ",") {
		if strings.TrimSpace(u) != "" {
			n++
		}
	}
	return n
}

// WatchQuorum starts a QuorumWatch of nc (and js, on nc) that forces a
// reconnect once JetStream has gone unanswered for after, counting the
// reconnects in m's ForcedReconnects (m may be nil). Stop it before
// closing nc. Start (the service runtime) starts one when the URL list
// has more than one server.
func WatchQuorum(nc *nats.Conn, js jetstream.JetStream, log *slog.Logger, m *Metrics, after time.Duration) *QuorumWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &QuorumWatch{
		nc: nc, js: js, log: log, m: m, after: after, hold: after,
		ctx: ctx, stop: cancel, done: make(chan struct{}),
		closed: nc.StatusChanged(nats.CLOSED),
	}
	if m != nil {
		m.Register(m.ForcedReconnects)
	}
	go w.run()
	return w
}

// Stop ends the watch and waits until it has. It is idempotent.
func (w *QuorumWatch) Stop() {
	if w == nil {
		return
	}
	w.stop()
	<-w.done
	w.nc.RemoveStatusListener(w.closed)
}

// Report tells the watch what a JetStream call of a component made on
// the watched connection returned: nil (or an idle outcome, such as a
// fetch that found no message) for an answer, or the error. Errors that
// a server cut off from its cluster gives (jsretry.Transient: no
// responders, timeouts, no leader) count towards a forced reconnect;
// others are not about the server and are ignored.
func (w *QuorumWatch) Report(err error) {
	if w == nil {
		return
	}
	w.observe(signalReport, err, time.Now())
}

func (w *QuorumWatch) run() {
	defer close(w.done)
	every := w.after / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.closed:
			return
		case <-tick.C:
		}
		if !w.nc.IsConnected() {
			continue
		}
		ctx, cancel := context.WithTimeout(w.ctx, every)
		_, err := w.js.AccountInfo(ctx)
		cancel()
		if w.ctx.Err() != nil {
			return
		}
		now := time.Now()
		w.observe(signalProbe, err, now)
		if w.due(now) {
			w.reconnect(now)
		}
	}
}

// observe records one outcome of signal on the server the connection is
// on now.
func (w *QuorumWatch) observe(signal int, err error, now time.Time) {
	// A server that answers the probe with no responders at all (the
	// jetstream package's ErrJetStreamNotEnabled) has no JetStream to
	// offer either.
	if err != nil && !jsretry.Transient(err) && (signal != signalProbe || !errors.Is(err, jetstream.ErrJetStreamNotEnabled)) {
		return
	}
	server := w.nc.ConnectedServerId()
	w.mu.Lock()
	defer w.mu.Unlock()
	if server != w.server {
		// Another server: what was seen on the last one says nothing.
		w.server = server
		w.clear()
	}
	switch {
	case err == nil:
		w.first[signal], w.last[signal], w.hard[signal], w.errs[signal] = time.Time{}, time.Time{}, time.Time{}, nil
		if signal == signalProbe {
			w.hold = w.after
		}
		return
	case w.first[signal].IsZero() || now.Sub(w.last[signal]) >= w.after:
		// The first failure, or the first after a silence: a new run.
		w.first[signal], w.hard[signal] = now, time.Time{}
	}
	w.last[signal], w.errs[signal] = now, err
	if !electing(err) {
		w.hard[signal] = now
	}
}

// electing reports whether err is JetStream saying it has no leader
// right now (503 "JetStream system temporarily unavailable", or "not the
// leader"). Every server of a healthy cluster answers so for the seconds
// of a meta leader election, such as the one a healed node's return
// starts; a server cut off from the majority answers so for good once it
// has noticed, and times out before.
func electing(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == 10008 || apiErr.ErrorCode == 10009)
}

// clear forgets every failure seen. w.mu is held.
func (w *QuorumWatch) clear() {
	w.first, w.last, w.hard, w.errs = [2]time.Time{}, [2]time.Time{}, [2]time.Time{}, [2]error{}
}

// due reports whether a signal has failed, with no success in between,
// from a first failure to a latest one at least the threshold apart (and
// the latest one recent: a component that stopped calling says nothing),
// on the current server, past the wait after the last forced reconnect.
// A run of nothing but election answers (electing) must last
// electingFactor times the threshold: longer than an election.
func (w *QuorumWatch) due(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Before(w.until) || w.server != w.nc.ConnectedServerId() {
		return false
	}
	for s := range w.first {
		if w.first[s].IsZero() || now.Sub(w.last[s]) >= w.after {
			continue
		}
		span := w.last[s].Sub(w.first[s])
		if (span >= w.after && now.Sub(w.hard[s]) < w.after) || span >= electingFactor*w.after {
			return true
		}
	}
	return false
}

func (w *QuorumWatch) reconnect(now time.Time) {
	w.mu.Lock()
	probeFor, reportFor := since(w.first[signalProbe], now), since(w.first[signalReport], now)
	probeErr, reportErr := w.errs[signalProbe], w.errs[signalReport]
	w.until = now.Add(w.hold)
	hold := w.hold
	w.hold = min(2*w.hold, maxFailoverHold)
	w.server = ""
	w.clear()
	w.mu.Unlock()
	from := ConnectedURL(w.nc)
	if len(w.nc.Servers()) < 2 {
		return // nowhere else to go
	}
	if err := w.nc.ForceReconnect(); err != nil {
		return // closed meanwhile
	}
	if w.m != nil {
		w.m.ForcedReconnects.Inc()
	}
	w.log.Warn("nats: jetstream unanswered on this server while connected (cut off from its cluster?); reconnecting to another server",
		"url", from, "probe_failing_for", probeFor, "probe_err", errText(probeErr),
		"calls_failing_for", reportFor, "calls_err", errText(reportErr), "next_move_not_before", hold)
}

// since is how long ago t was, or 0 for a zero t.
func since(t, now time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return now.Sub(t).Round(time.Millisecond)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
