// Package consent keeps the principals' trajectory export grants in the
// agentmesh_consent bucket, one entry per <tenant>.<principal> (docs/contract.md §7).
//
// A grant is prospective: the router stamps a run with the decision it
// reads when it accepts the run, with the revision of the entry that made
// it (wire.RunRecord.ConsentRev), and only stamped runs are exported. A
// withdrawal is a new revision of the entry; every export made under an
// earlier revision is then expired (State.WithdrawnSince), and the
// sweeper removes it. Decisions are compared by KV revision, never by
// clock, and are read from the bucket's stream leader.
package consent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/service/leader"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// State is a principal's consent as of one read.
type State struct {
	Tenant, Principal string
	// Granted reports a grant in force.
	Granted bool
	// Rev is the entry's revision; 0 when the principal never granted or
	// withdrew.
	Rev uint64
	// LastWithdrawal is the revision of the principal's last withdrawal,
	// 0 if none.
	LastWithdrawal uint64
	// Updated is when the entry was last written (unix ms), 0 if never.
	Updated int64
}

// WithdrawnSince reports whether the principal withdrew after the grant
// of revision rev: an export made under rev must go.
func (s State) WithdrawnSince(rev uint64) bool { return s.LastWithdrawal > rev }

// Store reads and writes consent entries.
type Store struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	bucket string
}

// Open returns the store on the consent bucket of names, which
// topology.Ensure creates.
func Open(ctx context.Context, js jetstream.JetStream, names subject.Names) (*Store, error) {
	kv, err := js.KeyValue(ctx, names.ConsentBucket())
	if err != nil {
		return nil, fmt.Errorf("consent bucket %s: %w", names.ConsentBucket(), err)
	}
	return &Store{js: js, kv: kv, bucket: names.ConsentBucket()}, nil
}

func key(tenant, principal string) (string, error) {
	if err := errors.Join(subject.ValidToken("tenant", tenant), subject.ValidToken("principal", principal)); err != nil {
		return "", err
	}
	return tenant + "." + principal, nil
}

// Get reads the principal's consent from the bucket's stream leader. A
// principal with no entry has not granted.
func (s *Store) Get(ctx context.Context, tenant, principal string) (State, error) {
	k, err := key(tenant, principal)
	if err != nil {
		return State{}, err
	}
	st, _, err := s.get(ctx, tenant, principal, k)
	return st, err
}

func (s *Store) get(ctx context.Context, tenant, principal, k string) (State, bool, error) {
	type read struct {
		b   []byte
		rev uint64
	}
	r, err := jsretry.Do(ctx, func(ctx context.Context) (read, error) {
		b, rev, err := leader.KeyValue(ctx, s.js, s.bucket, k)
		return read{b, rev}, err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return State{Tenant: tenant, Principal: principal}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("read consent of %s: %w", k, err)
	}
	c, err := wire.Decode[wire.Consent](r.b)
	if err != nil {
		return State{}, false, fmt.Errorf("consent of %s: %w", k, err)
	}
	st := State{Tenant: tenant, Principal: principal, Granted: c.Granted, Rev: r.rev, LastWithdrawal: c.WithdrawnRev, Updated: c.Updated}
	if !c.Granted {
		st.LastWithdrawal = r.rev
	}
	return st, true, nil
}

// Grant records the principal's grant and returns the state after it.
// Granting again while granted changes nothing: the runs stamped since the
// first grant stay valid.
func (s *Store) Grant(ctx context.Context, tenant, principal string) (State, error) {
	return s.set(ctx, tenant, principal, true)
}

// Withdraw records the principal's withdrawal and returns the state after
// it. Every export made under an earlier grant is then expired; the
// sweeper removes it. Withdrawing again while withdrawn changes nothing.
func (s *Store) Withdraw(ctx context.Context, tenant, principal string) (State, error) {
	return s.set(ctx, tenant, principal, false)
}

func (s *Store) set(ctx context.Context, tenant, principal string, grant bool) (State, error) {
	k, err := key(tenant, principal)
	if err != nil {
		return State{}, err
	}
	for {
		st, exists, err := s.get(ctx, tenant, principal, k)
		if err != nil {
			return State{}, err
		}
		if exists && st.Granted == grant {
			return st, nil
		}
		c := wire.Consent{V: wire.Version, Tenant: tenant, Principal: principal, Granted: grant, Updated: time.Now().UnixMilli()}
		if grant {
			c.WithdrawnRev = st.LastWithdrawal
		}
		b, err := wire.Marshal(&c)
		if err != nil {
			return State{}, err
		}
		rev, err := jsretry.Do(ctx, func(ctx context.Context) (uint64, error) {
			if !exists {
				return s.kv.Create(ctx, k, b)
			}
			return s.kv.Update(ctx, k, b, st.Rev)
		})
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongLast(err) {
			// Someone else wrote it since the read (or an attempt of
			// ours whose reply was lost): read again and decide again.
			continue
		}
		if err != nil {
			return State{}, fmt.Errorf("write consent of %s: %w", k, err)
		}
		st = State{Tenant: tenant, Principal: principal, Granted: grant, Rev: rev, LastWithdrawal: c.WithdrawnRev, Updated: c.Updated}
		if !grant {
			st.LastWithdrawal = rev
		}
		return st, nil
	}
}

func isWrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
