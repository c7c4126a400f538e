package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exporter/redact"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/service/jsretry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Rules keeps the tenants' redaction rules in the agentmesh_redaction
// bucket, one entry per tenant, and, for an exporter, the compiled
// redactor of each tenant, kept current by a watch.
type Rules struct {
	kv       jetstream.KeyValue
	builtins *redact.Redactor

	mu       sync.RWMutex
	tenants  map[string]*redact.Redactor
	bad      map[string]error // tenants whose stored rules do not compile
	watching bool
}

// OpenRules returns the rules of names' redaction bucket, which
// topology.Ensure creates.
func OpenRules(ctx context.Context, js jetstream.JetStream, names subject.Names) (*Rules, error) {
	kv, err := js.KeyValue(ctx, names.RedactionBucket())
	if err != nil {
		return nil, fmt.Errorf("redaction bucket %s: %w", names.RedactionBucket(), err)
	}
	builtins, err := redact.New(nil)
	if err != nil {
		return nil, err
	}
	return &Rules{kv: kv, builtins: builtins, tenants: map[string]*redact.Redactor{}, bad: map[string]error{}}, nil
}

// Set validates rules and stores them as the tenant's, replacing any it
// had; no rules clears them. An invalid rule stores nothing: the error
// joins a *redact.RuleError for each refused rule.
func (r *Rules) Set(ctx context.Context, tenant string, rules []redact.Rule) error {
	if err := subject.ValidToken("tenant", tenant); err != nil {
		return err
	}
	if _, err := redact.New(rules); err != nil {
		return err
	}
	doc := wire.RedactionRules{V: wire.Version, Tenant: tenant, Rules: make([]wire.RedactionRule, len(rules)), Updated: time.Now().UnixMilli()}
	for i, rule := range rules {
		doc.Rules[i] = wire.RedactionRule{Name: rule.Name, Pattern: rule.Pattern}
	}
	b, err := wire.Marshal(&doc)
	if err != nil {
		return err
	}
	if _, err := jsretry.Do(ctx, func(ctx context.Context) (uint64, error) { return r.kv.Put(ctx, tenant, b) }); err != nil {
		return fmt.Errorf("store the redaction rules of %s: %w", tenant, err)
	}
	return nil
}

// Get returns the tenant's stored rules (none if it has none).
func (r *Rules) Get(ctx context.Context, tenant string) ([]redact.Rule, error) {
	if err := subject.ValidToken("tenant", tenant); err != nil {
		return nil, err
	}
	e, err := jsretry.Do(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return r.kv.Get(ctx, tenant) })
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the redaction rules of %s: %w", tenant, err)
	}
	return decodeRules(e.Value())
}

func decodeRules(b []byte) ([]redact.Rule, error) {
	doc, err := wire.Decode[wire.RedactionRules](b)
	if err != nil {
		return nil, err
	}
	out := make([]redact.Rule, len(doc.Rules))
	for i, rule := range doc.Rules {
		out[i] = redact.Rule{Name: rule.Name, Pattern: rule.Pattern}
	}
	return out, nil
}

// Watch keeps the compiled redactors current until ctx ends or stop is
// called. It returns once the stored rules have all been read, so an
// export right after it uses them.
func (r *Rules) Watch(ctx context.Context, log *slog.Logger) (stop func(), err error) {
	w, err := r.kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch the redaction rules: %w", err)
	}
	r.mu.Lock()
	r.watching = true
	r.mu.Unlock()
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		initial := true
		for e := range w.Updates() {
			if e == nil {
				if initial {
					initial = false
					close(ready)
				}
				continue
			}
			r.apply(e, log)
		}
		if initial {
			close(ready)
		}
	}()
	select {
	case <-ready:
	case <-ctx.Done():
	}
	return func() { _ = w.Stop(); <-done }, nil
}

func (r *Rules) apply(e jetstream.KeyValueEntry, log *slog.Logger) {
	tenant := e.Key()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tenants, tenant)
	delete(r.bad, tenant)
	if e.Operation() != jetstream.KeyValuePut {
		log.Info("redaction rules cleared", "tenant", tenant)
		return
	}
	rules, err := decodeRules(e.Value())
	var red *redact.Redactor
	if err == nil {
		red, err = redact.New(rules)
	}
	if err != nil {
		// Set validates before it stores; a stored set that does not
		// compile (another build's rules) holds the tenant's exports
		// rather than export them less redacted.
		r.bad[tenant] = err
		log.Error("the tenant's redaction rules do not compile; its exports wait", "tenant", tenant, "err", err)
		return
	}
	r.tenants[tenant] = red
	log.Info("redaction rules loaded", "tenant", tenant, "rules", len(rules), "revision", e.Revision())
}

// ErrRulesUnusable is returned by For for a tenant whose stored rules do
// not compile.
var ErrRulesUnusable = errors.New("the tenant's redaction rules are unusable")

// For returns the tenant's redactor: the built-in detectors and its own
// rules. Only a watching Rules knows the tenant's rules.
func (r *Rules) For(tenant string) (*redact.Redactor, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.watching {
		return nil, errors.New("redaction rules are not watched")
	}
	if err := r.bad[tenant]; err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRulesUnusable, tenant, err)
	}
	if red, ok := r.tenants[tenant]; ok {
		return red, nil
	}
	return r.builtins, nil
}

// session adapts a redaction session to what trajectory.Build needs.
type session struct{ s *redact.Session }

func (s session) String(in string) string { return s.s.String(in) }

func (s session) Counts() []trajectory.Fired {
	fired := s.s.Counts()
	out := make([]trajectory.Fired, len(fired))
	for i, f := range fired {
		out[i] = trajectory.Fired{Rule: f.Rule, Count: f.Count}
	}
	return out
}
