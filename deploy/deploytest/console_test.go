package deploytest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// warnings records a logger's warnings: the gateway logs why it serves no
// console ("gateway: no console") and goes on serving the API.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, b.String())
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "; ")
}

// callGateway sends a request to the gateway at base with key as its
// bearer token (and body, if any, as JSON) and returns the answer's
// status and body.
func callGateway(ctx context.Context, t *testing.T, hc *http.Client, base, key, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// TestDeployConsole runs the gateway as the deploy runs it with
// AGENTMESH_GATEWAY_CONSOLE=true (deploy/k8s): gateway.Open with Console
// on the gateway user's connection. Every console page loads through
// deploy/nats's rights alone: a tenant's key sees its own run in the runs
// list and not another tenant's, an operator key (Config.OperatorKeys)
// sees both, the spend (one day and the default range), the runner pools
// (micro and the work consumers) and the exports. No request of the
// console's is refused (the connection's asynchronous errors), and the
// gateway user still writes no run record, ledger rollup or export record
// and can neither change nor delete the durables on the runs bucket.
func TestDeployConsole(t *testing.T) {
	m := startServer(t)
	serviceErrs := checkedServiceErrs(t)
	startMesh(t, m, serviceErrs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Keys, made as ops makes them: one of the tenant, one of another
	// tenant, one the console's operator.
	_, opsJS, oerrs := m.connect(t, "ops", nats.CustomInboxPrefix("_INBOX_ops"))
	keys, err := gateway.OpenKeys(ctx, opsJS, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := keys.Create(ctx, tenant, "alice")
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _, err := keys.Create(ctx, "other", "bob")
	if err != nil {
		t.Fatal(err)
	}
	opKey, op, err := keys.Create(ctx, "ops", "operator")
	if err != nil {
		t.Fatal(err)
	}
	// carol consents to export, so her run has an export record.
	carolKey, _, err := keys.Create(ctx, tenant, "carol")
	if err != nil {
		t.Fatal(err)
	}
	consents, err := consent.Open(ctx, opsJS, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := consents.Grant(ctx, tenant, "carol"); err != nil {
		t.Fatal(err)
	}
	for _, err := range oerrs.take() {
		t.Errorf("ops connection: %v", err)
	}

	// The gateway with its console, on the deploy's gateway user.
	gnc, gjs, gerrs := m.connect(t, "gateway")
	serviceErrs["gateway-console"] = gerrs
	warned := &warnings{}
	gctx, gcancel := context.WithCancel(context.Background())
	t.Cleanup(gcancel) // ends the console's watch of the runs bucket
	d := service.Deps{NC: gnc, JS: gjs, Log: slog.New(warned), Metrics: service.NewMetrics(prometheus.NewRegistry()), Health: &service.Health{}}
	g, err := gateway.Open(gctx, d, meshProfiles(t, startModelAPI(t)), gateway.Config{Addr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second,
		Console: true, OperatorKeys: []string{op.ID}})
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	if w := warned.String(); w != "" {
		t.Fatalf("the gateway warned: %s", w)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	hc := srv.Client()
	hc.Timeout = 30 * time.Second
	call := func(key, method, path, body string) (int, string) {
		t.Helper()
		code, b := callGateway(ctx, t, hc, srv.URL, key, method, path, body)
		return code, string(b)
	}
	page := func(key, path string) string {
		t.Helper()
		code, b := call(key, "GET", path, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		return b
	}
	chat := func(key, prompt string) string {
		t.Helper()
		code, b := call(key, "POST", "/v1/chat/completions", `{"model":"fixture","messages":[{"role":"user","content":"`+prompt+`"}]}`)
		var resp struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(b), &resp); code != http.StatusOK || err != nil || !strings.HasPrefix(resp.ID, "chatcmpl-") {
			t.Fatalf("POST /v1/chat/completions: %d %s", code, b)
		}
		return strings.TrimPrefix(resp.ID, "chatcmpl-")
	}

	// The runs list's live stream, open before the runs: it gets the
	// tenant's run as the index sees it written, and not the other's.
	live := make(chan string, 64)
	{
		lctx, lcancel := context.WithCancel(ctx)
		req, err := http.NewRequestWithContext(lctx, "GET", srv.URL+"/console/runs/live", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := srv.Client().Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			lcancel()
			t.Fatalf("GET /console/runs/live: %v %v", resp, err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if l, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					select {
					case live <- l:
					case <-lctx.Done():
						return
					}
				}
			}
		}()
		t.Cleanup(func() { lcancel(); _ = resp.Body.Close(); <-done })
	}

	// A run of each tenant, through this gateway's API, and carol's.
	id, otherID, carolID := chat(key, "hi"), chat(otherKey, "hello"), chat(carolKey, "export me")
	for seen := false; !seen; {
		select {
		case l := <-live:
			if strings.Contains(l, otherID) {
				t.Fatalf("the live runs list of %s's key has another tenant's run: %s", tenant, l)
			}
			seen = strings.Contains(l, `"run_id":"`+id+`"`)
		case <-time.After(10 * time.Second):
			t.Fatalf("the live runs list did not get run %s within 10s", id)
		}
	}

	// The runs list: the index follows the bucket, so a run's record
	// reaches it a moment after it is written.
	natstest.Eventually(t, 10*time.Second, func() error {
		if b := page(key, "/console/runs"); !strings.Contains(b, id) {
			return fmt.Errorf("/console/runs with the tenant's key does not list its run %s", id)
		}
		if b := page(opKey, "/console/runs"); !strings.Contains(b, id) || !strings.Contains(b, otherID) {
			return fmt.Errorf("/console/runs with the operator's key does not list both runs %s and %s", id, otherID)
		}
		return nil
	})
	if b := page(key, "/console/runs"); strings.Contains(b, otherID) {
		t.Fatalf("/console/runs with %s's key lists another tenant's run %s", tenant, otherID)
	}
	if b := page(key, "/console/runs/"+tenant+"/"+id); !strings.Contains(b, id) {
		t.Fatalf("the run's page does not name the run %s", id)
	}
	if code, b := call(key, "GET", "/console/runs/other/"+otherID, ""); code == http.StatusOK {
		t.Fatalf("another tenant's run page with %s's key: %d %s", tenant, code, b)
	}

	// Spend: a tenant's (its rollups and entries from the leaders), and
	// an operator's over one day and over the default range (the ledger's
	// key listing with one filter, then with one a day).
	page(key, "/console/spend")
	page(opKey, "/console/spend?days=1")
	page(opKey, "/console/spend")

	// The runner pools: runner-1's micro info and stats, and its pool's
	// work consumer, runner-fixture.
	b := page(opKey, "/console/runners")
	if strings.Contains(b, `class="error"`) || !strings.Contains(b, "runner-1") {
		t.Fatalf("/console/runners: no runner-1, or an error:\n%s", b)
	}
	if !regexp.MustCompile(`<td>fixture</td><td>1</td><td>\d+</td><td>\d+</td>`).MatchString(b) {
		t.Fatalf("/console/runners: no fixture pool with its work consumer's counts:\n%s", b)
	}

	// Exports: a tenant's (a filtered key listing) and every tenant's,
	// each record read from the bucket's leader.
	natstest.Eventually(t, 20*time.Second, func() error {
		for _, k := range []string{key, opKey} {
			if b := page(k, "/console/exports"); !strings.Contains(b, ">"+carolID+"<") {
				return fmt.Errorf("/console/exports does not list the export of %s", carolID)
			}
		}
		return nil
	})
	if b := page(otherKey, "/console/exports"); strings.Contains(b, carolID) {
		t.Fatalf("/console/exports with another tenant's key lists %s's export of %s", tenant, carolID)
	}

	m.noConsumersLeft(ctx, t, "the console's listings", "KV_agentmesh_ledger", "KV_agentmesh_exports")
	if err := gnc.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, err := range gerrs.take() {
		t.Errorf("gateway connection, while serving the console: %v", err)
	}
	if w := warned.String(); w != "" {
		t.Errorf("the gateway warned: %s", w)
	}

	// Still read-only, on a connection of its own (whose refusals are
	// expected): no write to the runs bucket, the ledger or the export
	// records, and the durables on the runs bucket are not its own.
	t.Run("the gateway user still cannot write the buckets the console reads", func(t *testing.T) {
		nc, js, errs := m.connect(t, "gateway")
		kv, err := js.KeyValue(ctx, "agentmesh_runs")
		if err != nil {
			t.Fatal(err)
		}
		denied(t, errs, "$KV.agentmesh_runs."+tenant+"."+id, func(ctx context.Context) error {
			_, err := kv.Put(ctx, tenant+"."+id, []byte("{}"))
			return err
		})
		denied(t, errs, "$KV.agentmesh_runs."+tenant+"."+id, func(ctx context.Context) error {
			return kv.Delete(ctx, tenant+"."+id)
		})
		deniedPublish(t, nc, errs, "$JS.API.STREAM.PURGE.KV_agentmesh_runs")
		deniedPublish(t, nc, errs, "$KV.agentmesh_ledger."+tenant+".x")
		deniedPublish(t, nc, errs, "$KV.agentmesh_spend."+tenant+".x")
		deniedPublish(t, nc, errs, "$KV.agentmesh_exports."+tenant+"."+id)
		for _, durable := range []string{subject.Names{}.LedgerConsumer(), subject.Names{}.ExporterConsumer()} {
			deniedPublish(t, nc, errs, "$JS.API.CONSUMER.DELETE.KV_agentmesh_runs."+durable)
			deniedPublish(t, nc, errs, "$JS.API.CONSUMER.CREATE.KV_agentmesh_runs."+durable+".$KV.agentmesh_runs.>")
			deniedPublish(t, nc, errs, "$JS.API.CONSUMER.MSG.NEXT.KV_agentmesh_runs."+durable)
		}
		deniedPublish(t, nc, errs, "$JS.API.CONSUMER.DELETE.AGENTMESH_WORK.runner-fixture")
		deniedPublish(t, nc, errs, "$JS.API.CONSUMER.MSG.NEXT.AGENTMESH_WORK.runner-fixture")
		deniedPublish(t, nc, errs, "$SRV.INFO.agentmesh-router")
		// The durables are still there, as their services made them.
		_, ojs, _ := m.connect(t, observer)
		for _, durable := range []string{subject.Names{}.LedgerConsumer(), subject.Names{}.ExporterConsumer()} {
			if _, err := ojs.Consumer(ctx, "KV_agentmesh_runs", durable); err != nil {
				t.Errorf("durable %s on KV_agentmesh_runs: %v", durable, err)
			}
		}
	})
}
