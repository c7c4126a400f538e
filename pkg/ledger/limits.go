package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotSet is returned for a budget or quota that is not set.
var ErrNotSet = errors.New("not set")

// PeriodStart is the first instant of the UTC period (wire.PeriodDay or
// wire.PeriodMonth) that holds t.
func PeriodStart(period string, t time.Time) (time.Time, error) {
	t = t.UTC()
	switch period {
	case wire.PeriodDay:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), nil
	case wire.PeriodMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC), nil
	}
	return time.Time{}, fmt.Errorf("%w: period %q, want %s or %s", ErrInvalid, period, wire.PeriodDay, wire.PeriodMonth)
}

// CheckBudget reports what is wrong with b: its tenant or principal is not
// a token, its amount not a non-negative decimal, or its period unknown.
func CheckBudget(b wire.Budget) error {
	if err := subject.ValidToken("tenant", b.Tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if b.Principal != "" {
		if err := subject.ValidToken("principal", b.Principal); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if _, err := amount(b.Amount); err != nil {
		return err
	}
	_, err := PeriodStart(b.Period, time.Time{})
	return err
}

// amount reads an exact decimal amount of USD, such as "12.50".
func amount(s string) (*big.Rat, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() < 0 || s == "" || s[0] == '+' || len(s) > 64 {
		return nil, fmt.Errorf("%w: amount %q is not a non-negative decimal number of USD", ErrInvalid, s)
	}
	for _, c := range s {
		if (c < '0' || c > '9') && c != '.' {
			return nil, fmt.Errorf("%w: amount %q is not a plain decimal (digits and one point)", ErrInvalid, s)
		}
	}
	return r, nil
}

// SetBudget sets a tenant's or a principal's budget.
func (s *Store) SetBudget(ctx context.Context, b wire.Budget) error {
	if err := CheckBudget(b); err != nil {
		return err
	}
	b.V, b.Updated = wire.Version, time.Now().UnixMilli()
	return s.putLimit(ctx, subject.BudgetKey(b.Tenant, b.Principal), &b)
}

// Budget reads a tenant's (principal "") or a principal's budget;
// ErrNotSet if there is none.
func (s *Store) Budget(ctx context.Context, tenant, principal string) (wire.Budget, error) {
	return getLimit[wire.Budget](ctx, s, subject.BudgetKey(tenant, principal))
}

// ClearBudget removes a budget; removing one that is not set succeeds.
func (s *Store) ClearBudget(ctx context.Context, tenant, principal string) error {
	return s.deleteLimit(ctx, subject.BudgetKey(tenant, principal))
}

// SetQuota sets a tenant's concurrency quota; 0 removes it.
func (s *Store) SetQuota(ctx context.Context, tenant string, maxRunning int) error {
	if err := subject.ValidToken("tenant", tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if maxRunning < 0 {
		return fmt.Errorf("%w: max running %d < 0", ErrInvalid, maxRunning)
	}
	if maxRunning == 0 {
		return s.deleteLimit(ctx, subject.QuotaKey(tenant))
	}
	return s.putLimit(ctx, subject.QuotaKey(tenant), &wire.Quota{V: wire.Version, Tenant: tenant, MaxRunning: maxRunning, Updated: time.Now().UnixMilli()})
}

// Quota reads a tenant's concurrency quota; ErrNotSet if there is none.
func (s *Store) Quota(ctx context.Context, tenant string) (wire.Quota, error) {
	return getLimit[wire.Quota](ctx, s, subject.QuotaKey(tenant))
}

// InFlight is the tenant's runs admitted under its quota and not ended
// yet, by run id, with the unix ms each was admitted at.
func (s *Store) InFlight(ctx context.Context, tenant string) (map[string]int64, error) {
	f, _, err := s.inFlight(ctx, tenant)
	return f.Runs, err
}

func (s *Store) putLimit(ctx context.Context, key string, v any) error {
	b, err := wire.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := jsretry.Do(ctx, func(ctx context.Context) (uint64, error) { return s.limits.Put(ctx, key, b) }); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

func (s *Store) deleteLimit(ctx context.Context, key string) error {
	_, err := jsretry.Do(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, s.limits.Delete(ctx, key) })
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

type limit interface {
	wire.Budget | wire.Quota | wire.InFlight
}

func getLimit[T limit](ctx context.Context, s *Store, key string) (T, error) {
	v, _, err := getLimitRev[T](ctx, s, key)
	return v, err
}

func getLimitRev[T limit](ctx context.Context, s *Store, key string) (T, uint64, error) {
	var zero T
	b, rev, err := s.leaderGet(ctx, s.names.LimitsBucket(), key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return zero, 0, fmt.Errorf("%s: %w", key, ErrNotSet)
	}
	if err != nil {
		return zero, 0, fmt.Errorf("read %s: %w", key, err)
	}
	v, err := wire.Decode[T](b)
	if err != nil {
		return zero, 0, fmt.Errorf("decode %s: %w", key, err)
	}
	return v, rev, nil
}

// inFlight reads the tenant's set of admitted runs and its revision (an
// empty set, 0 when there is none).
func (s *Store) inFlight(ctx context.Context, tenant string) (wire.InFlight, uint64, error) {
	f, rev, err := getLimitRev[wire.InFlight](ctx, s, subject.InFlightKey(tenant))
	if errors.Is(err, ErrNotSet) {
		return wire.InFlight{V: wire.Version, Tenant: tenant}, 0, nil
	}
	return f, rev, err
}

// errFull is changeInFlight's answer from a change that refuses.
var errFull = errors.New("quota taken")

// changeInFlight applies change to the tenant's set by compare-and-set,
// reading it again while other writers change it. change reports whether
// it changed the set (nothing is written if not) or an error to stop with.
func (s *Store) changeInFlight(ctx context.Context, tenant string, change func(runs map[string]int64) (bool, error)) error {
	return casLoop(ctx, s.limits, subject.InFlightKey(tenant), func() ([]byte, uint64, error) {
		f, rev, err := s.inFlight(ctx, tenant)
		if err != nil {
			return nil, 0, err
		}
		if f.Runs == nil {
			f.Runs = map[string]int64{}
		}
		if changed, err := change(f.Runs); err != nil || !changed {
			return nil, 0, err
		}
		b, err := wire.Marshal(&f)
		return b, rev, err
	})
}

// Release frees a run's slot of its tenant's quota; freeing a run that
// holds none succeeds. A write whose reply was lost is read again and
// finds the run gone.
func (s *Store) Release(ctx context.Context, tenant, runID string) error {
	return s.changeInFlight(ctx, tenant, func(runs map[string]int64) (bool, error) {
		if _, ok := runs[runID]; !ok {
			return false, nil
		}
		delete(runs, runID)
		return true, nil
	})
}
