package service

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Version is the agentmesh version reported in micro info.
const Version = "0.1.0"

// AsyncMaxPending bounds the unacknowledged async publishes of one connection.
const AsyncMaxPending = 16384

// Connect dials url as client name, with unlimited reconnects, and logs
// connection changes.
func Connect(url, name string, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", redactURL(url), err)
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

func redactURL(u string) string {
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			return u[:j+3] + "[REDACTED]" + u[i:]
		}
	}
	return u
}

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
	svc, err := micro.AddService(nc, micro.Config{Name: name, Version: Version, Description: description, Metadata: metadata})
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
// subject that is not a JetStream one and without a Status header. A
// tenant cannot publish on these subjects, but nats-server 2.15 lets it
// create a push consumer that delivers into any subject
// (nats-io/nats-server#8274); what such a consumer delivers carries a
// $JS.ACK reply, or none and a Status header (its heartbeats), and is
// dropped here unanswered.
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
