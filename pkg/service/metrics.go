package service

import (
	"errors"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the mesh's Prometheus metrics. NewMetrics creates every
// family but registers only agentmesh_build_info: each component registers
// the families it moves (Register), so that a service exports only those,
// and components sharing one registry (`agentmesh up`) share the families.
// All methods are safe for concurrent use.
type Metrics struct {
	// Runs counts runs reaching a state, by state and adapter.
	Runs *prometheus.CounterVec
	// RunDuration observes seconds from a run's acceptance to its fenced
	// terminal status, by adapter: once per run.
	RunDuration *prometheus.HistogramVec
	// Tokens counts the tokens of ended runs by class (input, output,
	// cache_read, cache_write, reasoning), once per run at its fenced
	// terminal status.
	Tokens *prometheus.CounterVec
	// Cost counts the USD cost of ended runs, once per run at its fenced
	// terminal status. A float: the exact sums are the runs' own.
	Cost prometheus.Counter
	// InFlight is the number of runs a runner process executes, by adapter.
	InFlight *prometheus.GaugeVec
	// TimeToFirstChunk observes seconds from acceptance to the first chunk.
	TimeToFirstChunk *prometheus.HistogramVec
	// Chunks counts published chunks by adapter.
	Chunks *prometheus.CounterVec
	// AdmissionRejections counts runs rejected because a queue was full.
	AdmissionRejections *prometheus.CounterVec
	// Fallbacks counts runs moved to a fallback profile before their first
	// output, by the profile they left and the one they moved to: once per
	// move, at its fenced routed status.
	Fallbacks *prometheus.CounterVec
	// Redeliveries counts work deliveries after the first, by adapter.
	Redeliveries *prometheus.CounterVec
	// LeaseExpiries counts running runs ended by the sweeper.
	LeaseExpiries prometheus.Counter
	// Dropped counts messages dropped without a reply, by service and reason.
	Dropped *prometheus.CounterVec
	// Exports counts the exporter's outcomes per consented run that ended:
	// exported, duplicate (already exported), withdrawn (consent withdrawn
	// before export), incomplete (its events aged out), failed (an attempt
	// that will be retried).
	Exports *prometheus.CounterVec
	// ExportLag observes seconds from a run's end to its export being stored.
	ExportLag prometheus.Histogram
	// ExportsSwept counts expired exports removed (bytes, then record), by reason.
	ExportsSwept *prometheus.CounterVec
	// ExportSweepFailures counts expired exports a sweep could not remove
	// (kept for the next sweep).
	ExportSweepFailures prometheus.Counter
	// ExportsPending is the number of expired exports left after the last sweep.
	ExportsPending prometheus.Gauge
	// GatewayRequests counts the HTTP gateway's answered requests, by
	// endpoint (its route, such as "POST /v1/responses") and status code.
	GatewayRequests *prometheus.CounterVec
	// GatewayDuration observes seconds from a gateway request's arrival to
	// its answer's end (a stream's last event), by endpoint.
	GatewayDuration *prometheus.HistogramVec
	// ForcedReconnects counts the reconnects a QuorumWatch forced: the
	// connection's server answered no JetStream request while connected.
	ForcedReconnects prometheus.Counter
	// GatewayFirstToken observes seconds from a gateway request's arrival
	// to the first text or tool call of its run, by endpoint.
	GatewayFirstToken *prometheus.HistogramVec

	reg        prometheus.Registerer
	mu         sync.Mutex
	registered map[prometheus.Collector]bool
}

// NewMetrics creates the metrics for reg and registers
// agentmesh_build_info on it; the components register the rest.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Runs: counterVec("agentmesh_runs_total", "Runs reaching a state, by state and adapter.", "state", "adapter"),
		RunDuration: histogramVec("agentmesh_run_duration_seconds", "Seconds from a run's acceptance to its terminal status, by adapter.",
			prometheus.ExponentialBuckets(0.01, 2, 18), "adapter"), // 10 ms to about 22 min
		Tokens: counterVec("agentmesh_tokens_total", "Tokens of ended runs, by class (input, output, cache_read, cache_write, reasoning).", "class"),
		Cost:   counter("agentmesh_cost_total", "Cost in USD of ended runs, priced from their usage (a float sum; each run's own cost is exact)."),
		InFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentmesh_runs_in_flight", Help: "Runs this runner process is executing, by adapter.",
		}, []string{"adapter"}),
		TimeToFirstChunk: histogramVec("agentmesh_time_to_first_chunk_seconds", "Seconds from acceptance to the first published chunk.",
			prometheus.ExponentialBuckets(0.001, 2, 18), "adapter"),
		Chunks:              counterVec("agentmesh_chunks_total", "Chunks published, by adapter.", "adapter"),
		AdmissionRejections: counterVec("agentmesh_admission_rejections_total", "Runs rejected with AdmissionRejected, by adapter.", "adapter"),
		Redeliveries:        counterVec("agentmesh_redeliveries_total", "Work deliveries after the first, by adapter.", "adapter"),
		Fallbacks: counterVec("agentmesh_fallbacks_total",
			"Runs moved to a fallback profile before their first output, by the profile left and the one moved to.", "from", "to"),
		LeaseExpiries: counter("agentmesh_lease_expiries_total", "Running runs ended failed by the sweeper after their lease expired."),
		Dropped:       counterVec("agentmesh_dropped_messages_total", "Messages dropped without a reply, by service and reason.", "service", "reason"),
		Exports: counterVec("agentmesh_exports_total",
			"Exporter outcomes for consented runs that ended, by outcome (exported, duplicate, withdrawn, incomplete, failed).", "outcome"),
		ExportLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "agentmesh_export_lag_seconds", Help: "Seconds from a run's end to its trajectory being stored.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		ExportsSwept: counterVec("agentmesh_exports_swept_total",
			"Expired trajectory exports removed, bytes then record, by reason (retention, withdrawn, abandoned).", "reason"),
		ExportSweepFailures: counter("agentmesh_export_sweep_failures_total", "Expired exports a sweep could not remove; the record is kept for the next sweep."),
		ExportsPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentmesh_exports_pending", Help: "Expired exports still stored after the last sweep.",
		}),
		GatewayRequests: counterVec("agentmesh_gateway_requests_total",
			"HTTP gateway requests answered, by endpoint (route) and status code.", "endpoint", "code"),
		GatewayDuration: histogramVec("agentmesh_gateway_request_duration_seconds",
			"Seconds from a gateway request's arrival to its answer's end (a stream's last event), by endpoint.",
			prometheus.ExponentialBuckets(0.001, 2, 22), "endpoint"), // 1 ms to about 35 min
		GatewayFirstToken: histogramVec("agentmesh_gateway_time_to_first_token_seconds",
			"Seconds from a gateway request's arrival to its run's first text or tool call, by endpoint.",
			prometheus.ExponentialBuckets(0.001, 2, 18), "endpoint"),
		ForcedReconnects: counter("agentmesh_nats_forced_reconnects_total",
			"Reconnects to another NATS server forced because the connected one answered no JetStream request for AGENTMESH_NATS_FAILOVER_AFTER while connected."),
		reg:        reg,
		registered: map[prometheus.Collector]bool{},
	}
	m.Register(buildInfo())
	return m
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// Register registers each of cs on the metrics' registry once: a
// collector registered before (by another component sharing these
// metrics) is left as it is, and one equal to a collector another
// Metrics registered on the same registry (prometheus.AlreadyRegisteredError)
// is not registered. A conflicting registration is a programmer error and
// panics.
func (m *Metrics) Register(cs ...prometheus.Collector) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range cs {
		if m.registered[c] {
			continue
		}
		err := m.reg.Register(c)
		var are prometheus.AlreadyRegisteredError
		switch {
		case err == nil:
			m.registered[c] = true
		case errors.As(err, &are):
			// Another Metrics on this registry exports the family.
		default:
			panic(err)
		}
	}
}

// Unregister removes c, registered with Register, from the registry; a
// collector that reads from a component (such as a router's queue depth)
// is unregistered when the component stops.
func (m *Metrics) Unregister(c prometheus.Collector) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.registered[c] {
		m.reg.Unregister(c)
		delete(m.registered, c)
	}
}

// BuildInfo is the build this binary was made from (runtime/debug):
// agentmesh's Version, the Go version, and the VCS commit the go command
// stamped ("unknown" without one; "-dirty" appended for a modified tree).
func BuildInfo() (version, goVersion, commit string) {
	version, goVersion, commit = Version, runtime.Version(), "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, goVersion, commit
	}
	goVersion = bi.GoVersion
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && commit != "unknown" {
		commit += "-dirty"
	}
	return version, goVersion, commit
}

func buildInfo() prometheus.Collector {
	version, goVersion, commit := BuildInfo()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "agentmesh_build_info", Help: "Always 1; its labels name the build: agentmesh version, Go version and VCS commit.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": goVersion, "commit": commit},
	})
	g.Set(1)
	return g
}
