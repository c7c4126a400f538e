package consent_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T) *consent.Store {
	t.Helper()
	_, _, js := natstest.RunMesh(t)
	s, err := consent.Open(context.Background(), js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGrantWithdrawGrant(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	st, err := s.Get(ctx, "acme", "alice")
	if err != nil || st.Granted || st.Rev != 0 || st.LastWithdrawal != 0 {
		t.Fatalf("no entry: %+v, %v; want not granted, revision 0", st, err)
	}
	g1, err := s.Grant(ctx, "acme", "alice")
	if err != nil || !g1.Granted || g1.Rev == 0 {
		t.Fatalf("grant: %+v, %v", g1, err)
	}
	if again, err := s.Grant(ctx, "acme", "alice"); err != nil || again.Rev != g1.Rev {
		t.Fatalf("second grant: %+v, %v; want the first grant's revision %d unchanged", again, err, g1.Rev)
	}
	if got, _ := s.Get(ctx, "acme", "alice"); got.Rev != g1.Rev || !got.Granted || got.WithdrawnSince(g1.Rev) {
		t.Fatalf("after grant: %+v", got)
	}
	w, err := s.Withdraw(ctx, "acme", "alice")
	if err != nil || w.Granted || w.LastWithdrawal <= g1.Rev || !w.WithdrawnSince(g1.Rev) {
		t.Fatalf("withdraw: %+v, %v; want a withdrawal after revision %d", w, err, g1.Rev)
	}
	g2, err := s.Grant(ctx, "acme", "alice")
	if err != nil || !g2.Granted {
		t.Fatalf("grant again: %+v, %v", g2, err)
	}
	// The withdrawal still expires what the first grant exported, and
	// nothing the second grant exports.
	got, err := s.Get(ctx, "acme", "alice")
	if err != nil || !got.WithdrawnSince(g1.Rev) || got.WithdrawnSince(g2.Rev) || got.LastWithdrawal != w.LastWithdrawal {
		t.Fatalf("after grant, withdraw, grant: %+v, %v; want the withdrawal %d to expire revision %d only", got, err, w.LastWithdrawal, g1.Rev)
	}
	// Principals and tenants are separate.
	if other, _ := s.Get(ctx, "beta", "alice"); other.Granted {
		t.Fatal("a grant in acme granted in beta")
	}
}

func TestBadIdentity(t *testing.T) {
	s := open(t)
	for _, tc := range []struct{ tenant, principal string }{{"", "alice"}, {"acme", ""}, {"ac.me", "alice"}, {"acme", "al*ce"}} {
		if _, err := s.Grant(context.Background(), tc.tenant, tc.principal); !errors.Is(err, subject.ErrInvalidToken) {
			t.Errorf("Grant(%q, %q) = %v, want ErrInvalidToken", tc.tenant, tc.principal, err)
		}
	}
}

// TestConcurrentWrites races grants and withdrawals: every write is
// decided on the revision it read, so the final state is one of them and
// the last withdrawal is never lost.
func TestConcurrentWrites(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	first, err := s.Grant(ctx, "acme", "bob")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = s.Withdraw(ctx, "acme", "bob")
			} else {
				_, err = s.Grant(ctx, "acme", "bob")
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := s.Get(ctx, "acme", "bob")
	if err != nil || !got.WithdrawnSince(first.Rev) {
		t.Fatalf("after racing writes: %+v, %v; want a withdrawal after the first grant", got, err)
	}
}
