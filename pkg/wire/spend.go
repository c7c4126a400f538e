package wire

// The spend ledger's, the budgets' and the quota's entries
// (docs/contract.md §12). Every amount is an exact decimal string in USD,
// summed with pkg/ledger/cost's rational arithmetic; none is ever a float.

// SpendEntry is one ended run's spend in agentmesh_spend under
// <tenant>.<day>.<run_id>.<created>: written once (a create), from the
// run's terminal record, and the source of truth the rollups fold.
type SpendEntry struct {
	V         int               `msgpack:"v" json:"v"`
	Tenant    string            `msgpack:"tenant" json:"tenant"`
	RunID     string            `msgpack:"run_id" json:"run_id"`
	Principal string            `msgpack:"principal" json:"principal"`
	Profile   string            `msgpack:"profile" json:"profile"`
	Labels    map[string]string `msgpack:"labels,omitempty" json:"labels,omitempty"`
	State     State             `msgpack:"state" json:"state"`
	// Day is the UTC day (YYYYMMDD) the run's end was recorded on.
	Day   string `msgpack:"day" json:"day"`
	Usage Usage  `msgpack:"usage" json:"usage"`
	Cost  string `msgpack:"cost" json:"cost"`
	Ended int64  `msgpack:"ended" json:"ended"` // unix ms
}

// SpendSum is the spend of a set of runs: how many, their tokens by class
// and their exact cost.
type SpendSum struct {
	Runs  int64  `msgpack:"runs" json:"runs"`
	Usage Usage  `msgpack:"usage" json:"usage"`
	Cost  string `msgpack:"cost" json:"cost"`
}

// PrincipalSpend is one principal's spend in a rollup, in all and by the
// profile and by each label (key "<name>=<value>") of its runs.
type PrincipalSpend struct {
	Total    SpendSum            `msgpack:"total" json:"total"`
	Profiles map[string]SpendSum `msgpack:"profiles,omitempty" json:"profiles,omitempty"`
	Labels   map[string]SpendSum `msgpack:"labels,omitempty" json:"labels,omitempty"`
}

// SpendRollup is a tenant's spend on one UTC day in agentmesh_ledger under
// <tenant>.<day>: the sum of the day's spend entries up to stream sequence
// Folded of the spend bucket, updated by compare-and-set. A reader adds
// the day's entries stored after Folded.
type SpendRollup struct {
	V          int                       `msgpack:"v" json:"v"`
	Tenant     string                    `msgpack:"tenant" json:"tenant"`
	Day        string                    `msgpack:"day" json:"day"`
	Folded     uint64                    `msgpack:"folded" json:"folded"`
	Principals map[string]PrincipalSpend `msgpack:"principals,omitempty" json:"principals,omitempty"`
	Updated    int64                     `msgpack:"updated" json:"updated"` // unix ms
}

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// Budget is a tenant's (Principal empty) or a principal's budget in
// agentmesh_limits under budget.<tenant> or budget.<tenant>.<principal>:
// once the spend in the current UTC Period reaches Amount, the router
// rejects the scope's new runs with BudgetExceeded.
type Budget struct {
	V         int    `msgpack:"v" json:"v"`
	Tenant    string `msgpack:"tenant" json:"tenant"`
	Principal string `msgpack:"principal,omitempty" json:"principal,omitempty"`
	Amount    string `msgpack:"amount" json:"amount"` // exact decimal USD
	Period    string `msgpack:"period" json:"period"` // PeriodDay or PeriodMonth
	Updated   int64  `msgpack:"updated" json:"updated"`
}

// Quota is a tenant's concurrency quota in agentmesh_limits under
// quota.<tenant>: at most MaxRunning of its runs admitted and not ended.
type Quota struct {
	V          int    `msgpack:"v" json:"v"`
	Tenant     string `msgpack:"tenant" json:"tenant"`
	MaxRunning int    `msgpack:"max_running" json:"max_running"`
	Updated    int64  `msgpack:"updated" json:"updated"`
}

// InFlight is the set of a tenant's runs admitted under its quota and not
// ended, in agentmesh_limits under inflight.<tenant>: run id → the unix ms
// it was admitted at. Routers add to it by compare-and-set; the ledger
// writer removes a run once its end is recorded.
type InFlight struct {
	V      int              `msgpack:"v" json:"v"`
	Tenant string           `msgpack:"tenant" json:"tenant"`
	Runs   map[string]int64 `msgpack:"runs,omitempty" json:"runs,omitempty"`
}
