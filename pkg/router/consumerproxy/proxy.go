// Package consumerproxy stands between a tenant and JetStream's consumer
// create API on the events stream. nats-server 2.15 never checks a push
// consumer's deliver_subject against the creator's permissions
// (nats-io/nats-server#8274), and a consumer a tenant creates lives in the
// mesh's account, so with the create API itself a tenant could have the
// server deliver its events into any subject of the mesh. Instead, the
// tenant's account imports the create API from this proxy
// (deploy/nats/accounts.conf): the import maps the tenant's
// $JS.<api>.CONSUMER.CREATE.<events>.<consumer>.<filter> to
// subject.Names.ConsumerCreateProxy(tenant, consumer, filter), so the
// tenant comes from the subject the import chose, never from the body.
//
// The proxy refuses a push consumer, a durable, and any filter outside the
// tenant's own events with JetStream's own error response shape (nats.go
// reports a *jetstream.APIError), and forwards everything else unchanged to
// the real filtered create API on the mesh's connection, relaying the
// server's reply bytes as they came.
package consumerproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("invalid consumer proxy config")

// Config configures a Proxy.
type Config struct {
	// Timeout bounds one forwarded create (default 4s: below nats.go's
	// default JetStream request timeout of 5s, so the client hears the
	// proxy's answer, not its own timeout).
	Timeout time.Duration
	// MaxInFlight bounds the creates forwarded at once (default 256); one
	// more is answered at once with a 503 error.
	MaxInFlight int
}

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = 4 * time.Second
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Timeout <= 0:
		return fmt.Errorf("%w: timeout must be > 0, got %s", ErrInvalidConfig, c.Timeout)
	case c.MaxInFlight < 1:
		return fmt.Errorf("%w: max in flight must be > 0, got %d", ErrInvalidConfig, c.MaxInFlight)
	}
	return nil
}

// JetStream API error codes the proxy answers with (nats-server's
// errors.json).
const (
	// ErrCodeBadRequest is JetStream's generic "bad request".
	ErrCodeBadRequest uint16 = 10003
	// ErrCodeClusterUnavailable is "JetStream system temporarily unavailable".
	ErrCodeClusterUnavailable uint16 = 10008
	// ErrCodeInvalidJSON is "invalid JSON".
	ErrCodeInvalidJSON uint16 = 10025
	// ErrCodeInvalidDeliverSubject is "invalid push consumer deliver subject".
	ErrCodeInvalidDeliverSubject uint16 = 10112
)

// Refusal is a create request the proxy does not forward. Its Response is
// what the tenant receives: JetStream's consumer create response with only
// an error.
type Refusal struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code"`
	Description string `json:"description"`
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("consumer create refused (%d/%d): %s", r.Code, r.ErrCode, r.Description)
}

// Response is the JSON JetStream answers a refused create with.
func (r *Refusal) Response() []byte {
	b, err := json.Marshal(struct {
		Type  string   `json:"type"`
		Error *Refusal `json:"error"`
	}{"io.nats.jetstream.api.v1.consumer_create_response", r})
	if err != nil {
		panic(err) // three plain fields
	}
	return b
}

func refuse(code uint16, format string, args ...any) *Refusal {
	status := 400
	if code == ErrCodeClusterUnavailable {
		status = 503
	}
	return &Refusal{Code: status, ErrCode: code, Description: "agentmesh: " + fmt.Sprintf(format, args...)}
}

// createRequest is the part of JetStream's CreateConsumerRequest the proxy
// checks. It is decoded with encoding/json, as nats-server decodes the
// same bytes, so a key matches here exactly when it matches there
// (case-insensitively, the last of duplicates winning).
type createRequest struct {
	Stream string          `json:"stream_name"`
	Config *consumerConfig `json:"config"`
	Action string          `json:"action"`
}

type consumerConfig struct {
	Durable        string   `json:"durable_name"`
	Name           string   `json:"name"`
	DeliverSubject string   `json:"deliver_subject"`
	DeliverGroup   string   `json:"deliver_group"`
	FlowControl    bool     `json:"flow_control"`
	Heartbeat      int64    `json:"idle_heartbeat"`
	FilterSubject  string   `json:"filter_subject"`
	FilterSubjects []string `json:"filter_subjects"`
	Direct         bool     `json:"direct"`
}

// Validate checks one create request that arrived on subj (a
// ConsumerCreateProxy subject) with body, and returns the JetStream API
// subject to forward it to, or the Refusal to answer with. Only a pull
// consumer (ordered ones are pull consumers) named as in the subject, with
// no durable name, on the events stream, created (never updated), with
// exactly the one filter of the subject, inside the subject's tenant's
// events, passes.
func Validate(names subject.Names, subj string, body []byte) (string, *Refusal) {
	tenant, consumer, filter, ok := names.ParseConsumerCreateProxy(subj)
	if !ok {
		return "", refuse(ErrCodeBadRequest, "subject %q is not a consumer create", subj)
	}
	if err := subject.ValidToken("tenant", tenant); err != nil {
		return "", refuse(ErrCodeBadRequest, "%v", err)
	}
	own := names.TenantEvents(tenant)
	ownPrefix := strings.TrimSuffix(own, ">")
	rest, inside := strings.CutPrefix(filter, ownPrefix)
	if !inside || rest == "" {
		return "", refuse(ErrCodeBadRequest, "filter %q is outside the tenant's events %s", filter, own)
	}
	for _, tok := range strings.Split(rest, ".") {
		if tok == "" {
			return "", refuse(ErrCodeBadRequest, "filter %q has an empty token", filter)
		}
	}
	var req createRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "", refuse(ErrCodeInvalidJSON, "invalid JSON: %v", err)
	}
	cfg := req.Config
	switch {
	case req.Stream != names.EventsStream():
		return "", refuse(ErrCodeBadRequest, "stream_name %q: consumers may be created on %s only", req.Stream, names.EventsStream())
	case cfg == nil:
		return "", refuse(ErrCodeBadRequest, "config is required")
	case cfg.DeliverSubject != "" || cfg.DeliverGroup != "" || cfg.FlowControl || cfg.Heartbeat != 0:
		return "", refuse(ErrCodeInvalidDeliverSubject, "push consumers are not allowed (deliver_subject %q): use a pull or ordered consumer", cfg.DeliverSubject)
	case cfg.Durable != "":
		return "", refuse(ErrCodeBadRequest, "durable consumers are not allowed (durable_name %q): use an ephemeral pull or ordered consumer", cfg.Durable)
	case cfg.Direct:
		return "", refuse(ErrCodeBadRequest, "direct consumers are not allowed")
	case cfg.Name != consumer:
		return "", refuse(ErrCodeBadRequest, "config name %q differs from the consumer name %q of the subject", cfg.Name, consumer)
	case len(cfg.FilterSubjects) > 0:
		return "", refuse(ErrCodeBadRequest, "several filter subjects are not allowed: use filter_subject %q alone", filter)
	case cfg.FilterSubject != filter:
		return "", refuse(ErrCodeBadRequest, "filter_subject %q differs from the subject's filter %q", cfg.FilterSubject, filter)
	case req.Action != "" && req.Action != "create":
		return "", refuse(ErrCodeBadRequest, "action %q is not allowed: consumers may only be created", req.Action)
	}
	return subject.ConsumerCreate(names.EventsStream(), consumer, filter), nil
}

// Proxy answers ConsumerCreateProxy requests. Build it with New and give
// Handler to the service's endpoint on Subject.
type Proxy struct {
	nc    *nats.Conn
	names subject.Names
	log   *slog.Logger
	cfg   Config
	slots chan struct{}
}

// New builds a proxy that forwards on nc, the mesh's own connection.
func New(nc *nats.Conn, names subject.Names, log *slog.Logger, cfg Config) (*Proxy, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Proxy{nc: nc, names: names, log: log, cfg: cfg, slots: make(chan struct{}, cfg.MaxInFlight)}, nil
}

// Subject is the subject the proxy's endpoint serves.
func (p *Proxy) Subject() string { return p.names.ConsumerCreateProxyAll() }

// Handler answers each request on its own goroutine, owned by wg, so a
// slow JetStream never holds up the service's other endpoints. A forward
// ends with ctx or after Config.Timeout, whichever comes first.
func (p *Proxy) Handler(ctx context.Context, wg *sync.WaitGroup) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		select {
		case p.slots <- struct{}{}:
		default:
			p.respond(req, refuse(ErrCodeClusterUnavailable, "too many consumer creates in flight; try again").Response())
			return
		}
		wg.Go(func() {
			defer func() { <-p.slots }()
			p.respond(req, p.serve(ctx, req.Subject(), req.Data()))
		})
	})
}

func (p *Proxy) respond(req micro.Request, b []byte) {
	if err := req.Respond(b); err != nil {
		p.log.Warn("answer consumer create", "subject", req.Subject(), "err", err)
	}
}

// serve validates and forwards one request and returns the answer.
func (p *Proxy) serve(ctx context.Context, subj string, body []byte) []byte {
	target, refusal := Validate(p.names, subj, body)
	if refusal != nil {
		p.log.Info("consumer create refused", "subject", subj, "reason", refusal.Description)
		return refusal.Response()
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	msg, err := p.nc.RequestWithContext(ctx, target, body)
	if err != nil {
		p.log.Warn("forward consumer create", "subject", target, "err", err)
		return refuse(ErrCodeClusterUnavailable, "JetStream did not answer the consumer create: %v", err).Response()
	}
	return msg.Data
}
