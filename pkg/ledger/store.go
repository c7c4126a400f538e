package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"time"

	"github.com/agentmesh/agentmesh/pkg/ledger/cost"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/service/leader"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrInvalid is returned for a malformed day, amount or period.
var ErrInvalid = errors.New("invalid ledger argument")

// casRetries bounds a compare-and-set loop on one key.
const casRetries = 64

// DayFormat is how a UTC day is written in keys and entries.
const DayFormat = "20060102"

// Day is t's UTC day as the ledger keys it.
func Day(t time.Time) string { return t.UTC().Format(DayFormat) }

// ParseDay reads a day given as YYYY-MM-DD or YYYYMMDD.
func ParseDay(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02", DayFormat} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: day %q is not YYYY-MM-DD", ErrInvalid, s)
}

// Store reads and writes the spend entries and rollups, and the limits.
// It is safe for concurrent use.
type Store struct {
	js          jetstream.JetStream
	names       subject.Names
	spend       jetstream.KeyValue
	ledger      jetstream.KeyValue
	limits      jetstream.KeyValue
	spendStream string // the spend bucket's stream
}

// Open binds a store to the topology, which must exist.
func Open(ctx context.Context, js jetstream.JetStream, names subject.Names) (*Store, error) {
	s := &Store{js: js, names: names}
	for _, b := range []struct {
		kv   *jetstream.KeyValue
		name string
	}{{&s.spend, names.SpendBucket()}, {&s.ledger, names.LedgerBucket()}, {&s.limits, names.LimitsBucket()}} {
		kv, err := js.KeyValue(ctx, b.name)
		if err != nil {
			return nil, fmt.Errorf("open bucket %s: %w", b.name, err)
		}
		*b.kv = kv
	}
	s.spendStream = "KV_" + names.SpendBucket()
	return s, nil
}

// Sum is the exact spend of a set of runs.
type Sum struct {
	Runs  int64
	Usage wire.Usage
	Cost  *big.Rat
}

func (s *Sum) cost() *big.Rat {
	if s.Cost == nil {
		s.Cost = new(big.Rat)
	}
	return s.Cost
}

// Add adds o to s.
func (s *Sum) Add(o Sum) {
	s.Runs += o.Runs
	u := &s.Usage
	u.InputTokens += o.Usage.InputTokens
	u.OutputTokens += o.Usage.OutputTokens
	u.CacheReadTokens += o.Usage.CacheReadTokens
	u.CacheWriteTokens += o.Usage.CacheWriteTokens
	u.ReasoningTokens += o.Usage.ReasoningTokens
	if o.Cost != nil {
		s.cost().Add(s.cost(), o.Cost)
	}
}

// CostString is the exact cost as a decimal ("0" for none).
func (s Sum) CostString() string {
	if s.Cost == nil {
		return "0"
	}
	return cost.Format(s.Cost)
}

func (s Sum) wire() wire.SpendSum {
	return wire.SpendSum{Runs: s.Runs, Usage: s.Usage, Cost: s.CostString()}
}

func sumOf(w wire.SpendSum) (Sum, error) {
	r, ok := new(big.Rat).SetString(w.Cost)
	if !ok {
		return Sum{}, fmt.Errorf("cost %q is not a decimal", w.Cost)
	}
	return Sum{Runs: w.Runs, Usage: w.Usage, Cost: r}, nil
}

// PrincipalSpend is one principal's spend: in all, by profile and by
// label ("<name>=<value>").
type PrincipalSpend struct {
	Total    Sum
	Profiles map[string]*Sum
	Labels   map[string]*Sum
}

// Spend is a tenant's spend over some days, by principal.
type Spend struct {
	Principals map[string]*PrincipalSpend
}

// Total is the tenant's spend over every principal.
func (s *Spend) Total() Sum { return s.Tenant().Total }

// Tenant is the tenant's spend over every principal, in all, by profile
// and by label.
func (s *Spend) Tenant() PrincipalSpend {
	t := PrincipalSpend{Profiles: map[string]*Sum{}, Labels: map[string]*Sum{}}
	for _, ps := range s.Principals {
		t.add(ps)
	}
	return t
}

// add adds o to p.
func (p *PrincipalSpend) add(o *PrincipalSpend) {
	p.Total.Add(o.Total)
	for k, v := range o.Profiles {
		addTo(p.Profiles, k, *v)
	}
	for k, v := range o.Labels {
		addTo(p.Labels, k, *v)
	}
}

// Principal is one principal's spend (zero if it spent nothing).
func (s *Spend) Principal(p string) PrincipalSpend {
	if ps := s.Principals[p]; ps != nil {
		return *ps
	}
	return PrincipalSpend{}
}

func (s *Spend) principal(p string) *PrincipalSpend {
	if s.Principals == nil {
		s.Principals = map[string]*PrincipalSpend{}
	}
	ps := s.Principals[p]
	if ps == nil {
		ps = &PrincipalSpend{Profiles: map[string]*Sum{}, Labels: map[string]*Sum{}}
		s.Principals[p] = ps
	}
	return ps
}

func addTo(m map[string]*Sum, k string, o Sum) {
	s := m[k]
	if s == nil {
		s = &Sum{}
		m[k] = s
	}
	s.Add(o)
}

// Merge adds o to s.
func (s *Spend) Merge(o *Spend) {
	for p, ops := range o.Principals {
		s.principal(p).add(ops)
	}
}

// add adds one run's entry.
func (s *Spend) add(e wire.SpendEntry) error {
	c, ok := new(big.Rat).SetString(e.Cost)
	if !ok || c.Sign() < 0 {
		return fmt.Errorf("spend entry of run %s: cost %q is not a non-negative decimal", e.RunID, e.Cost)
	}
	one := Sum{Runs: 1, Usage: e.Usage, Cost: c}
	ps := s.principal(e.Principal)
	ps.Total.Add(one)
	addTo(ps.Profiles, e.Profile, one)
	for _, k := range slices.Sorted(maps.Keys(e.Labels)) {
		addTo(ps.Labels, k+"="+e.Labels[k], one)
	}
	return nil
}

func (s *Spend) rollup(tenant, day string, folded uint64) wire.SpendRollup {
	r := wire.SpendRollup{V: wire.Version, Tenant: tenant, Day: day, Folded: folded, Updated: time.Now().UnixMilli()}
	if len(s.Principals) > 0 {
		r.Principals = map[string]wire.PrincipalSpend{}
	}
	for p, ps := range s.Principals {
		w := wire.PrincipalSpend{Total: ps.Total.wire()}
		if len(ps.Profiles) > 0 {
			w.Profiles = map[string]wire.SpendSum{}
			for k, v := range ps.Profiles {
				w.Profiles[k] = v.wire()
			}
		}
		if len(ps.Labels) > 0 {
			w.Labels = map[string]wire.SpendSum{}
			for k, v := range ps.Labels {
				w.Labels[k] = v.wire()
			}
		}
		r.Principals[p] = w
	}
	return r
}

func spendOf(r wire.SpendRollup) (*Spend, error) {
	s := &Spend{}
	for p, w := range r.Principals {
		ps := s.principal(p)
		var err error
		if ps.Total, err = sumOf(w.Total); err != nil {
			return nil, fmt.Errorf("rollup %s.%s, principal %s: %w", r.Tenant, r.Day, p, err)
		}
		for _, m := range []struct {
			in  map[string]wire.SpendSum
			out map[string]*Sum
		}{{w.Profiles, ps.Profiles}, {w.Labels, ps.Labels}} {
			for k, v := range m.in {
				sum, err := sumOf(v)
				if err != nil {
					return nil, fmt.Errorf("rollup %s.%s, principal %s, %s: %w", r.Tenant, r.Day, p, k, err)
				}
				m.out[k] = &sum
			}
		}
	}
	return s, nil
}

// Entry is the spend entry of rec, an ended run's record, and its key; ok
// is false for a run that spent nothing by contract (rejected: it never
// ran). The day is the UTC day of the record's end.
func Entry(rec wire.RunRecord) (e wire.SpendEntry, key string, ok bool) {
	if !rec.State.Terminal() || rec.State == wire.StateRejected {
		return e, "", false
	}
	e = wire.SpendEntry{V: wire.Version, Tenant: rec.Tenant, RunID: rec.RunID, Principal: rec.Principal, Profile: rec.Profile,
		Labels: rec.Labels, State: rec.State, Day: Day(time.UnixMilli(rec.Updated)), Cost: rec.Cost, Ended: rec.Updated}
	if rec.Usage != nil {
		e.Usage = *rec.Usage
	}
	if e.Cost == "" {
		e.Cost = "0"
	}
	return e, subject.SpendKey(rec.Tenant, e.Day, rec.RunID, rec.Created), true
}

// Put writes a run's spend entry once: a second Put of the same entry
// (a redelivery, another writer) writes nothing and succeeds.
func (s *Store) Put(ctx context.Context, key string, e wire.SpendEntry) error {
	b, err := wire.Marshal(&e)
	if err != nil {
		return err
	}
	_, err = jsretry.Do(ctx, func(ctx context.Context) (uint64, error) { return s.spend.Create(ctx, key, b) })
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil // written before: the same run's same entry
	}
	if err != nil {
		return fmt.Errorf("write spend entry %s: %w", key, err)
	}
	return nil
}

// tail adds to sp the spend entries of tenant's day stored after stream
// sequence after, read from the spend bucket's stream leader (a replica,
// which a direct get may ask, can lag: a fold would then leave the
// writer's own entry unfolded), and returns
// the sequence of the last one (after if there is none).
func (s *Store) tail(ctx context.Context, tenant, day string, after uint64, sp *Spend) (uint64, error) {
	filter := s.names.SpendDayFilter(tenant, day)
	last := after
	for {
		m, err := jsretry.Do(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
			return leader.NextMsg(ctx, s.js, s.spendStream, last+1, filter)
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return last, nil
		}
		if err != nil {
			return last, fmt.Errorf("read the spend of %s on %s: %w", tenant, day, err)
		}
		last = m.Sequence
		if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			continue
		}
		e, err := wire.Decode[wire.SpendEntry](m.Data)
		if err != nil {
			return last, fmt.Errorf("spend entry %s: %w", m.Subject, err)
		}
		if err := sp.add(e); err != nil {
			return last, err
		}
	}
}

// readRollup reads a day's rollup and its revision from the ledger
// bucket's leader (zero, 0 when there is none yet).
func (s *Store) readRollup(ctx context.Context, tenant, day string) (*Spend, uint64, uint64, error) {
	b, rev, err := s.leaderGet(ctx, s.names.LedgerBucket(), subject.RollupKey(tenant, day))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &Spend{}, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read rollup %s: %w", subject.RollupKey(tenant, day), err)
	}
	r, err := wire.Decode[wire.SpendRollup](b)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("decode rollup %s: %w", subject.RollupKey(tenant, day), err)
	}
	sp, err := spendOf(r)
	return sp, r.Folded, rev, err
}

// Fold adds to tenant's day's rollup every entry of the day stored after
// the sequence it has folded to, by compare-and-set: a write refused for
// the revision (another writer folded meanwhile, or this one's own
// earlier attempt whose reply was lost) is read and folded again, and
// finds only what is left. It returns once the rollup has folded every
// entry stored before the call.
func (s *Store) Fold(ctx context.Context, tenant, day string) error {
	key := subject.RollupKey(tenant, day)
	return casLoop(ctx, s.ledger, key, func() ([]byte, uint64, error) {
		sp, folded, rev, err := s.readRollup(ctx, tenant, day)
		if err != nil {
			return nil, 0, err
		}
		last, err := s.tail(ctx, tenant, day, folded, sp)
		if err != nil || last == folded {
			return nil, 0, err
		}
		r := sp.rollup(tenant, day, last)
		b, err := wire.Marshal(&r)
		return b, rev, err
	})
}

// casLoop writes what step gives over the revision it read (0: a
// create), reading again while the write is refused for the revision
// (another writer wrote meanwhile, or this one's own earlier attempt whose
// reply was lost): step reads the key and returns the bytes to write and
// the revision they go over, or nil bytes when there is nothing to write.
func casLoop(ctx context.Context, kv jetstream.KeyValue, key string, step func() ([]byte, uint64, error)) error {
	for range casRetries {
		b, rev, err := step()
		if err != nil || b == nil {
			return err
		}
		_, err = jsretry.Do(ctx, func(ctx context.Context) (uint64, error) {
			if rev == 0 {
				return kv.Create(ctx, key, b)
			}
			return kv.Update(ctx, key, b, rev)
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("write %s of %s: %w", key, kv.Bucket(), err)
		}
	}
	return fmt.Errorf("write %s of %s: it kept changing", key, kv.Bucket())
}

// DaySpend is tenant's spend on day: its rollup and the entries stored
// after what the rollup has folded, read from the leaders.
func (s *Store) DaySpend(ctx context.Context, tenant, day string) (*Spend, error) {
	sp, folded, _, err := s.readRollup(ctx, tenant, day)
	if err != nil {
		return nil, err
	}
	if _, err := s.tail(ctx, tenant, day, folded, sp); err != nil {
		return nil, err
	}
	return sp, nil
}

// Days is the UTC days from since to until, both included, in order.
func Days(since, until time.Time) []string {
	var days []string
	for d := since.UTC().Truncate(24 * time.Hour); !d.After(until.UTC()); d = d.AddDate(0, 0, 1) {
		days = append(days, Day(d))
	}
	return days
}

// Range is tenant's spend on each of days (Days), by day.
func (s *Store) Range(ctx context.Context, tenant string, days []string) (map[string]*Spend, error) {
	out := make(map[string]*Spend, len(days))
	for _, d := range days {
		sp, err := s.DaySpend(ctx, tenant, d)
		if err != nil {
			return nil, err
		}
		out[d] = sp
	}
	return out, nil
}

type value struct {
	b   []byte
	rev uint64
}

// leaderGet reads key of bucket from the bucket's stream leader, through
// a leader election.
func (s *Store) leaderGet(ctx context.Context, bucket, key string) ([]byte, uint64, error) {
	v, err := jsretry.Do(ctx, func(ctx context.Context) (value, error) {
		b, rev, err := leader.KeyValue(ctx, s.js, bucket, key)
		return value{b, rev}, err
	})
	return v.b, v.rev, err
}
