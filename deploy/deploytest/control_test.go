package deploytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go"
)

// The session control subjects beside cancel: a follow-up prompt to a live
// session (input) and the answer to one of its permission requests
// (permission). A tenant requests agentmesh.control.<tenant>.<run_id>.<kind>,
// the router answers agentmesh.control.*.*.<kind> in queue group
// agentmesh-control and forwards to the owning runner on
// agentmesh.runner.<runner_id>.<kind>. The tests below run no service: a
// connection on the router user and one on the runner user stand in for
// them, with the file's permissions.

// controlGroup is the router's queue group for the control subjects
// (pkg/router).
const controlGroup = "agentmesh-control"

// ownerRunner is the runner the stand-in router forwards to.
const ownerRunner = "runner-1"

// sessionControl is one control subject kind of a session, as pkg/subject
// names it.
type sessionControl struct {
	kind   string
	tenant func(tenant, runID string) string
	all    func() string
	runner func(runnerID string) string
}

var sessionControls = []sessionControl{
	{"input", subject.Names{}.Input, subject.Names{}.InputAll, subject.Names{}.RunnerInput},
	{"permission", subject.Names{}.Permission, subject.Names{}.PermissionAll, subject.Names{}.RunnerPermission},
}

// controlStandIns subscribes a stand-in router (the router user, queue
// group agentmesh-control, on every tenant's sc subjects) forwarding each
// request to a stand-in runner (the runner user, on ownerRunner's sc
// subject), which answers with what it was sent. It returns the subjects
// the router received requests on, in order, and checks at the end of the
// test that neither connection was refused anything.
func controlStandIns(t *testing.T, m *mesh, sc sessionControl) (routed <-chan string) {
	t.Helper()
	rnc, _, rerrs := m.connect(t, "router")
	nnc, _, nerrs := m.connect(t, "runner")
	if _, err := nnc.Subscribe(sc.runner(ownerRunner), func(msg *nats.Msg) {
		_ = msg.Respond(append([]byte(ownerRunner+" got "), msg.Data...))
	}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	if _, err := rnc.QueueSubscribe(sc.all(), controlGroup, func(msg *nats.Msg) {
		got <- msg.Subject
		resp, err := rnc.Request(sc.runner(ownerRunner), msg.Data, 5*time.Second)
		if err != nil {
			_ = msg.Respond([]byte("forward: " + err.Error()))
			return
		}
		_ = msg.Respond(resp.Data)
	}); err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*nats.Conn{rnc, nnc} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		noAsyncErrs(t, "router", rnc, rerrs)
		noAsyncErrs(t, "runner", nnc, nerrs)
	})
	return got
}

// subscribeAs subscribes user to subj, flushed so that it is in place.
func subscribeAs(t *testing.T, m *mesh, user, subj string) (*nats.Subscription, *nats.Conn, *asyncErrs) {
	t.Helper()
	nc, _, errs := m.connect(t, user)
	sub, err := nc.SubscribeSync(subj)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub, nc, errs
}

// noAsyncErrs checks the server refused nothing of user's connection nc.
func noAsyncErrs(t *testing.T, user string, nc *nats.Conn, errs *asyncErrs) {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Error(err)
	}
	for _, err := range errs.take() {
		t.Errorf("%s connection: %v", user, err)
	}
}

// connectTenant dials as tenant acme's user, with its inbox prefix.
func connectTenant(t *testing.T, m *mesh) (*nats.Conn, *asyncErrs) {
	t.Helper()
	nc, _, errs := m.connect(t, "tenant-"+tenant, nats.CustomInboxPrefix(client.InboxPrefix(tenant)))
	return nc, errs
}

// requestRouted requests subj on user's connection nc and checks that the
// stand-in router received it on subj and the owning runner answered.
func requestRouted(t *testing.T, nc *nats.Conn, user, subj string, routed <-chan string) {
	t.Helper()
	resp, err := nc.Request(subj, []byte(`{"hello":"session"}`), 5*time.Second)
	if err != nil {
		t.Fatalf("request %s as %s: %v", subj, user, err)
	}
	if got := string(resp.Data); got != ownerRunner+` got {"hello":"session"}` {
		t.Fatalf("answer %q, want the owning runner's", got)
	}
	select {
	case got := <-routed:
		if got != subj {
			t.Fatalf("the router received %s, want %s", got, subj)
		}
	default:
		t.Fatal("answered, but the router saw no request")
	}
}

// nothingRouted checks the stand-in router received no request.
func nothingRouted(t *testing.T, routed <-chan string) {
	t.Helper()
	select {
	case subj := <-routed:
		t.Fatalf("the router received a request on %s, want none", subj)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestTenantSendsInputAndPermissionToItsOwnSessions(t *testing.T) {
	m := startServer(t)
	for _, sc := range sessionControls {
		t.Run(sc.kind, func(t *testing.T) {
			routed := controlStandIns(t, m, sc)
			tnc, terrs := connectTenant(t, m)
			id := client.NewRunID()
			want := "agentmesh.control." + tenant + "." + id + "." + sc.kind
			if subj := sc.tenant(tenant, id); subj != want {
				t.Fatalf("pkg/subject names %s, want %s", subj, want)
			}

			// The request crosses the tenant's import, reaches the router
			// on its own subject, and the runner's answer comes back.
			requestRouted(t, tnc, "tenant-"+tenant, want, routed)

			// A reply subject the tenant names stays in its account: the
			// router answers, and a runner's subject receives nothing.
			victim, _, _ := subscribeAs(t, m, "runner", sc.runner("victim"))
			req := nats.NewMsg(want)
			req.Reply = sc.runner("victim")
			if err := tnc.PublishMsg(req); err != nil {
				t.Fatal(err)
			}
			select {
			case subj := <-routed:
				if subj != want {
					t.Fatalf("the router received %s, want %s", subj, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the router saw no request with the tenant's reply subject")
			}
			if msg, err := victim.NextMsg(200 * time.Millisecond); err == nil {
				t.Fatalf("a tenant's reply subject reached a runner: %s %q", msg.Subject, msg.Data)
			}

			noAsyncErrs(t, "tenant-"+tenant, tnc, terrs)
		})
	}
}

func TestTenantCannotSendInputToAnotherTenantsSession(t *testing.T) {
	m := startServer(t)
	for _, sc := range sessionControls {
		t.Run(sc.kind, func(t *testing.T) {
			routed := controlStandIns(t, m, sc)
			other := sc.tenant("other", "r1")

			// The tenant's user: a permission violation, as for cancel.
			tnc, terrs := connectTenant(t, m)
			denied(t, terrs, other, func(ctx context.Context) error {
				_, err := tnc.RequestWithContext(ctx, other, []byte("{}"))
				return err
			})
			nothingRouted(t, routed)

			// The account itself: with no permission limits, a user of
			// the tenant's account finds no responder on another tenant's
			// subject, since no import leads there, while its own is
			// answered.
			onc, _, _ := m.connect(t, tenantObserver)
			if _, err := onc.Request(other, []byte("{}"), time.Second); !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("request %s from tenant %s's account: %v, want no responders", other, tenant, err)
			}
			nothingRouted(t, routed)
			own := sc.tenant(tenant, "r1")
			if _, err := onc.Request(own, []byte("{}"), 5*time.Second); err != nil {
				t.Fatalf("request %s from tenant %s's account: %v", own, tenant, err)
			}
			if subj := <-routed; subj != own {
				t.Fatalf("the router received %s, want %s", subj, own)
			}
		})
	}
}

func TestTenantCannotReachARunnersInputOrPermission(t *testing.T) {
	m := startServer(t)
	for _, sc := range sessionControls {
		t.Run(sc.kind, func(t *testing.T) {
			runnerSubj := sc.runner(ownerRunner)
			sub, nnc, nerrs := subscribeAs(t, m, "runner", sc.runner("*"))

			// The tenant's user may neither publish to a runner's subject
			// nor subscribe to them.
			tnc, terrs := connectTenant(t, m)
			deniedPublish(t, tnc, terrs, runnerSubj)
			deniedSubscribe(t, tnc, terrs, sc.runner("*"))

			// Nor does the tenant's account reach them at all.
			onc, _, _ := m.connect(t, tenantObserver)
			if err := onc.Publish(runnerSubj, []byte("{}")); err != nil {
				t.Fatal(err)
			}
			if _, err := onc.Request(runnerSubj, []byte("{}"), time.Second); !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("request %s from tenant %s's account: %v, want no responders", runnerSubj, tenant, err)
			}
			if msg, err := sub.NextMsg(200 * time.Millisecond); err == nil {
				t.Fatalf("a tenant reached a runner: %s %q", msg.Subject, msg.Data)
			}

			// The router may publish there, and the runner receives it.
			rnc, _, rerrs := m.connect(t, "router")
			if err := rnc.Publish(runnerSubj, []byte("{}")); err != nil {
				t.Fatal(err)
			}
			if msg, err := sub.NextMsg(5 * time.Second); err != nil || msg.Subject != runnerSubj {
				t.Fatalf("the router's publish to %s: %v %v", runnerSubj, msg, err)
			}
			noAsyncErrs(t, "router", rnc, rerrs)
			noAsyncErrs(t, "runner", nnc, nerrs)
		})
	}
}

// The gateway user requests input and permission for whichever tenant an
// API key names: the router answers it on the tenant's own subject, as it
// answers the tenant. It may not subscribe to those subjects, nor reach a
// runner's.
func TestGatewaySendsInputAndPermissionForAnyTenant(t *testing.T) {
	m := startServer(t)
	for _, sc := range sessionControls {
		t.Run(sc.kind, func(t *testing.T) {
			routed := controlStandIns(t, m, sc)
			gnc, _, gerrs := m.connect(t, "gateway")
			for _, tn := range []string{tenant, "other"} {
				requestRouted(t, gnc, "gateway", sc.tenant(tn, client.NewRunID()), routed)
			}
			noAsyncErrs(t, "gateway", gnc, gerrs)
			deniedSubscribe(t, gnc, gerrs, sc.all())
			deniedPublish(t, gnc, gerrs, sc.runner(ownerRunner))
		})
	}
}
