package exporter

import "github.com/agentmesh/agentmesh/pkg/service"

// registerMetrics registers the families an enabled exporter moves: its
// outcomes (each seen at 0), its lag and the records it drops. An idle
// (disabled) exporter moves none.
func registerMetrics(m *service.Metrics) {
	m.Register(m.Exports, m.ExportLag, m.Dropped)
	for _, o := range []Outcome{Exported, Duplicate, Withdrawn, Incomplete, Failed} {
		m.Exports.WithLabelValues(string(o)) // seen at 0 before the first
	}
	m.Dropped.WithLabelValues("exporter", "undecodable")
}
