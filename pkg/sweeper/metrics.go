package sweeper

import (
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/runs"
)

// The counts of the sweeper's micro stats (service.Tally).
const (
	tallyExpired  = "runs_expired"   // running runs ended failed after their runner's lease expired
	tallyTimedOut = "runs_timed_out" // runs ended timed_out past their deadline
	tallySwept    = "exports_swept"  // expired exports removed

	tallyArtifactsSwept = "artifacts_swept" // expired artifacts removed
)

// registerMetrics registers the families the sweeper moves: those of
// ending runs, lease expiries and, when it expires exports, the export
// sweep's (each reason seen at 0).
func (s *Sweeper) registerMetrics() {
	m := s.d.Metrics
	runs.RegisterMetrics(m)
	m.Register(m.LeaseExpiries)
	s.tally.Seen(tallyExpired, tallyTimedOut, tallyArtifactsSwept)
	if s.exports == nil {
		return
	}
	m.Register(m.ExportsSwept, m.ExportSweepFailures, m.ExportsPending)
	for _, r := range []string{exports.ReasonRetention, exports.ReasonWithdrawn, exports.ReasonAbandoned} {
		m.ExportsSwept.WithLabelValues(r)
	}
	s.tally.Seen(tallySwept)
}
