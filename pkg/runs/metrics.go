package runs

import (
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// tokenClasses are the label values of agentmesh_tokens_total, the token
// classes profiles price.
var tokenClasses = []string{cost.Input, cost.Output, cost.CacheRead, cost.CacheWrite, cost.Reasoning}

// RegisterMetrics registers on m the families a component that ends runs
// (Store.End) moves: agentmesh_runs_total, agentmesh_run_duration_seconds,
// agentmesh_tokens_total (each class seen at 0) and agentmesh_cost_total.
// The router, the runner host and the sweeper call it; it is idempotent.
func RegisterMetrics(m *service.Metrics) {
	m.Register(m.Runs, m.RunDuration, m.Tokens, m.Cost)
	for _, c := range tokenClasses {
		m.Tokens.WithLabelValues(c)
	}
}

// observeEnd counts a run that End ended: once per run, since only the
// one writer whose fenced terminal status was stored gets here.
func (s *Store) observeEnd(r Run, st wire.Status) {
	m := s.metrics
	m.Runs.WithLabelValues(string(st.State), r.adapterLabel()).Inc()
	if r.Record.Created > 0 {
		m.RunDuration.WithLabelValues(r.adapterLabel()).Observe(max(0, time.Since(time.UnixMilli(r.Record.Created)).Seconds()))
	}
	sum := st.Summary
	if sum == nil {
		return
	}
	if u := sum.Usage; u != nil {
		for i, n := range []int64{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens} {
			if n > 0 {
				m.Tokens.WithLabelValues(tokenClasses[i]).Add(float64(n))
			}
		}
	}
	if sum.Cost != "" {
		// An exact decimal (pkg/ledger/cost); the float sum is the metric's.
		if usd, err := strconv.ParseFloat(sum.Cost, 64); err == nil && usd > 0 {
			m.Cost.Add(usd)
		} else if err != nil {
			s.logger.Warn("cost of an ended run is not a decimal", "run_id", r.Record.RunID, "cost", sum.Cost, "err", err)
		}
	}
}
