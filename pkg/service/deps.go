package service

import (
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/service/telemetry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Deps is what a service component is built from. The caller owns the
// connection, and every component only reads these.
type Deps struct {
	NC      *nats.Conn
	JS      jetstream.JetStream
	Names   subject.Names
	Log     *slog.Logger
	Metrics *Metrics
	Health  *Health
	// Tracing is the process's OpenTelemetry tracing; nil is off.
	Tracing *telemetry.Tracing
	// Quorum moves NC off a server cut off from its cluster; components
	// Report their JetStream calls' outcomes to it. Nil (a single server,
	// or off) does nothing.
	Quorum *QuorumWatch
}
