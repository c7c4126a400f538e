package service

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Version is the agentmesh version reported in micro info.
const Version = "0.1.0"

// AsyncMaxPending bounds the unacknowledged async publishes of one connection.
const AsyncMaxPending = 16384

// Connect dials url (one URL or a comma-separated list) as client name,
// with unlimited reconnects, and logs connection changes; opts come last
// (credentials and TLS, NATSAuth.Options). Neither its logs nor its error
// show a URL's userinfo (RedactURL).
func Connect(url, name string, log *slog.Logger, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", ConnectedURL(nc)) }),
	}, opts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", RedactURL(url), RedactError(url, err))
	}
	// Every run a runner holds pipelines its chunks on this connection:
	// allow a deep async window (pkg/events falls back to synchronous
	// publishing when even this is full).
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(AsyncMaxPending))
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

// Redacted is what RedactURL and RedactError put in place of a URL's
// userinfo.
const Redacted = "[REDACTED]"

// RedactURL masks the userinfo (user and password, or a token) of every
// URL in s, a comma-separated list as nats.Connect takes it
// ("nats://u:p@a:4222,nats://u:p2@b:4222"); a URL without userinfo, with
// or without a scheme, is kept as it is. The userinfo is everything up to
// a URL's last '@', so a password holding '@', '/' or ':' is masked whole.
// It never fails: a URL it cannot parse is masked by the same rule.
func RedactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, u := range parts {
		if start, end, ok := userinfo(u); ok {
			parts[i] = u[:start] + Redacted + u[end:]
		}
	}
	return strings.Join(parts, ",")
}

// RedactError returns err with the userinfo of every URL in the list s,
// and its secret part on its own (a password or a token), masked in its
// text: an error of nats.Connect may quote a URL it could not parse. The
// returned error wraps err, so errors.Is and errors.As still see it.
func RedactError(s string, err error) error {
	if err == nil {
		return nil
	}
	var secrets []string
	for _, u := range strings.Split(s, ",") {
		start, end, ok := userinfo(u)
		if !ok || end == start {
			continue
		}
		info := u[start:end]
		secrets = append(secrets, info)
		if _, pass, found := strings.Cut(info, ":"); found {
			if pass != "" {
				secrets = append(secrets, pass)
			}
		}
	}
	if len(secrets) == 0 {
		return err
	}
	// Longest first, so a userinfo is masked whole before its password.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	msg := err.Error()
	for _, sec := range secrets {
		msg = strings.ReplaceAll(msg, sec, Redacted)
	}
	return &redactedError{msg: msg, err: err}
}

// userinfo locates the userinfo of one URL: u[start:end] is what lies
// between its scheme's "://" (or its start) and its last '@'.
func userinfo(u string) (start, end int, ok bool) {
	end = strings.LastIndexByte(u, '@')
	if end < 0 {
		return 0, 0, false
	}
	if j := strings.Index(u, "://"); j >= 0 && j < end {
		start = j + 3
	} else {
		start = len(u) - len(strings.TrimLeft(u, " \t"))
	}
	return start, end, true
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// ConnectedURL is the URL nc is connected to with its userinfo masked
// (RedactURL), for logs; empty while nc is not connected. Unlike
// nats.Conn.ConnectedUrlRedacted it masks a token and a user name too.
func ConnectedURL(nc *nats.Conn) string { return RedactURL(nc.ConnectedUrl()) }

// ConnCheck is a readiness check that passes while nc is connected.
func ConnCheck(nc *nats.Conn) func() error {
	return func() error {
		if !nc.IsConnected() {
			return errors.New("nats not connected")
		}
		return nil
	}
}

// Endpoint is one micro endpoint.
type Endpoint struct {
	Name       string
	Subject    string
	QueueGroup string // empty: micro's default group
	Handler    micro.Handler
}

// Register adds a micro service with the given endpoints. Stop the returned
// service to unregister it.
func Register(nc *nats.Conn, name, description string, metadata map[string]string, eps ...Endpoint) (micro.Service, error) {
	return register(nc, micro.Config{Name: name, Version: Version, Description: description, Metadata: metadata}, eps)
}

func register(nc *nats.Conn, cfg micro.Config, eps []Endpoint) (micro.Service, error) {
	name := cfg.Name
	svc, err := micro.AddService(nc, cfg)
	if err != nil {
		return nil, fmt.Errorf("register micro service %s: %w", name, err)
	}
	for _, ep := range eps {
		opts := []micro.EndpointOpt{micro.WithEndpointSubject(ep.Subject)}
		if ep.QueueGroup != "" {
			opts = append(opts, micro.WithEndpointQueueGroup(ep.QueueGroup))
		}
		if err := svc.AddEndpoint(ep.Name, requestsOnly(ep.Handler), opts...); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("register endpoint %s of %s: %w", ep.Name, name, err)
		}
	}
	return svc, nil
}

// requestsOnly passes on only real requests: a message with a reply
// subject that is not a JetStream one and without a Status header.
// nats-server 2.15 lets whoever may create a consumer make it push into
// any subject (nats-io/nats-server#8274); tenants' creates go through the
// router's proxy (pkg/router/consumerproxy), which refuses push consumers, and
// this is the second line: what such a consumer delivers carries a $JS.ACK
// reply, or none and a Status header (its heartbeats), and is dropped here
// unanswered.
func requestsOnly(next micro.Handler) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		reply := req.Reply()
		if reply == "" || strings.HasPrefix(reply, "$JS.") || req.Headers().Get("Status") != "" {
			return
		}
		next.Handle(req)
	})
}

// Metadata returns a copy of md with key set to value, for a micro
// service's info.
func Metadata(md map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(md)+1)
	for k, v := range md {
		out[k] = v
	}
	out[key] = value
	return out
}
