package service

import (
	"fmt"
	"maps"
	"sync"

	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Tally counts what one service instance handled (runs routed, runs
// executed, exports stored, ...) by name; RegisterCounting shows the counts
// as the data of each of its endpoints' micro stats (`nats micro stats`).
// The zero value is ready; safe for concurrent use.
type Tally struct {
	mu     sync.Mutex
	counts map[string]uint64
}

// Add adds n to the count name.
func (t *Tally) Add(name string, n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[string]uint64{}
	}
	t.counts[name] += n
}

// Seen makes each of names show, at 0 until counted.
func (t *Tally) Seen(names ...string) {
	for _, n := range names {
		t.Add(n, 0)
	}
}

// Counts returns a copy of the counts.
func (t *Tally) Counts() map[string]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]uint64, len(t.counts))
	maps.Copy(out, t.counts)
	return out
}

// RegisterCounting is Register whose endpoints' micro stats carry
// tally's counts as their data, so that `nats micro stats` shows the runs
// a service instance handled beside the requests its endpoints answered.
func RegisterCounting(nc *nats.Conn, name, description string, metadata map[string]string, tally *Tally, eps ...Endpoint) (micro.Service, error) {
	return register(nc, micro.Config{Name: name, Version: Version, Description: description, Metadata: metadata,
		StatsHandler: func(*micro.Endpoint) any { return tally.Counts() }}, eps)
}

// Reply answers req with body, whose Content-Type is ct. When e is not
// nil the answer is an error answer as micro has it: body still carries
// the error for clients that decode it, and the headers Nats-Service-Error
// (the class and message) and Nats-Service-Error-Code (ErrorCode) mark it.
// Call it before the handler returns: micro counts the error in the
// endpoint's stats when the handler returns. An answer sent later goes
// through ReplyLater.
func Reply(req micro.Request, ct wire.ContentType, body []byte, e *wire.Error) error {
	h := micro.Headers{}
	ct.Set(h)
	if e == nil {
		return req.Respond(body, micro.WithHeaders(h))
	}
	return req.Error(ErrorCode(e), errorText(e), body, micro.WithHeaders(h))
}

// ReplyLater is Reply for an answer sent after the handler returned (from
// a goroutine the handler started): the same body and headers, but not
// counted in micro's stats, which are taken when the handler returns and
// which this must not write to meanwhile.
func ReplyLater(req micro.Request, ct wire.ContentType, body []byte, e *wire.Error) error {
	h := micro.Headers{}
	ct.Set(h)
	if e != nil {
		h[micro.ErrorHeader] = []string{errorText(e)}
		h[micro.ErrorCodeHeader] = []string{ErrorCode(e)}
	}
	return req.Respond(body, micro.WithHeaders(h))
}

func errorText(e *wire.Error) string { return fmt.Sprintf("%s: %s", e.Class, e.Message) }

// ErrorCode is the HTTP-like status micro's Nats-Service-Error-Code
// carries for e: 400 for a bad request, 429 for admission refused, 501
// for an unsupported operation, 503 for a retryable error, 502 for a
// provider's error, and 500 for the rest.
func ErrorCode(e *wire.Error) string {
	switch {
	case e.Class.IsA(wire.AgenticRequestValidationError), e.Class.IsA(wire.ProfileError), e.Class.IsA(wire.PinMismatch):
		return "400"
	case e.Class.IsA(wire.AdmissionRejected):
		return "429"
	case e.Class.IsA(wire.AgenticOperationUnsupported):
		return "501"
	case e.Retryable, e.Class.IsA(wire.ProviderUnavailable):
		return "503"
	case e.Class.IsA(wire.ProviderError):
		return "502"
	default:
		return "500"
	}
}
