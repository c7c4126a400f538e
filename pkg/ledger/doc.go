// Package ledger keeps the exact spend of ended runs per tenant,
// principal, profile and label per UTC day, the budgets and concurrency
// quotas set on it, and the admission check the router makes against
// them (docs/contract.md §12).
//
// # The ledger
//
// The source of truth is one spend entry per ended run in agentmesh_spend
// (wire.SpendEntry, key <tenant>.<day>.<run_id>.<created>), written with a
// create, so a redelivered terminal record or a second writer finds it
// there and writes nothing. Each (tenant, UTC day) has a rollup in
// agentmesh_ledger (wire.SpendRollup): the sum of that day's entries up
// to the spend bucket's stream sequence it names (Folded), advanced by
// compare-and-set over its revision. A writer folds every entry of the
// day stored after Folded at once, so of two writers folding the same
// entries one wins and the other finds nothing left to fold. A reader
// adds to the rollup the day's entries stored after Folded, so a writer
// that stopped between the entry and the fold loses nothing: its entry is
// read, and the next writer folds it. Every sum is a big.Rat of the
// entries' exact costs (pkg/ledger/cost), stored as a decimal string.
//
// The writer (Writer) is a durable consumer of the run records, shared by
// every router: for each terminal record it writes the run's entry, folds
// the day, frees the run's slot of its tenant's quota, and only then
// acknowledges the record.
//
// # Budgets and quotas
//
// A budget (wire.Budget) is an exact decimal amount of USD per UTC day or
// month for a tenant or one of its principals; a quota (wire.Quota) is a
// tenant's most runs admitted and not ended. Gate.Admit refuses a run with
// BudgetExceeded once the period's spend has reached a budget, and with
// AdmissionRejected once the tenant's quota is taken. A run admitted is
// never cut off. The quota's slots are one set per tenant in
// agentmesh_limits (wire.InFlight), changed only by compare-and-set, so
// two routers never admit past it.
package ledger
