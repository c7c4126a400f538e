package service

import (
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/topology"
	"github.com/kelseyhightower/envconfig"
)

// Config is the environment configuration common to every service, read
// with the prefix AGENTMESH (AGENTMESH_NATS_URL, AGENTMESH_HTTP_ADDR, ...).
type Config struct {
	// Names come from split_words, never an envconfig tag: a tag would
	// also read the unprefixed variable (NATS_URL) when AGENTMESH_NATS_URL
	// is unset.
	NatsURL         string        `split_words:"true" default:"nats://127.0.0.1:4222"`
	HTTPAddr        string        `split_words:"true" default:"127.0.0.1:0"`
	Prefix          string        `split_words:"true"`
	ShutdownTimeout time.Duration `split_words:"true" default:"20s"`
	Replicas        int           `split_words:"true" default:"1"`
	EventsMaxAge    time.Duration `split_words:"true" default:"24h"`
	WorkQueueMax    int64         `split_words:"true" default:"1024"`
	// WorkQueueTenantMax is one tenant's queue per adapter (0: 256, or
	// WorkQueueMax if smaller).
	WorkQueueTenantMax int64         `split_words:"true"`
	LeaseTTL           time.Duration `split_words:"true" default:"30s"`
	// RunRetention is how long an ended run's record is kept (at least
	// EventsMaxAge).
	RunRetention time.Duration `split_words:"true" default:"168h"`
	LogLevel     string        `split_words:"true" default:"info"`
}

// Topology is the topology configuration c describes.
func (c Config) Topology() topology.Config {
	return topology.Config{
		Names:              subject.Names{Prefix: c.Prefix},
		Replicas:           c.Replicas,
		EventsMaxAge:       c.EventsMaxAge,
		WorkQueueMax:       c.WorkQueueMax,
		WorkQueueTenantMax: c.WorkQueueTenantMax,
		LeaseTTL:           c.LeaseTTL,
		RunRetention:       c.RunRetention,
	}
}

// Load reads spec (a pointer to a struct that embeds Config) from the
// environment with the prefix AGENTMESH and returns an error naming the bad
// variable.
func Load(spec any) error {
	if err := envconfig.Process("AGENTMESH", spec); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// Usage prints the variables spec reads, with types and defaults.
func Usage(spec any) error { return envconfig.Usage("AGENTMESH", spec) }
