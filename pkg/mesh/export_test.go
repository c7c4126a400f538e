package mesh_test

// Trajectory export through the mesh (issue 10): operator enablement ×
// principal consent, redaction of every string before a byte is stored,
// the schema, withdrawal and the sweeper, and two exporters and two
// sweepers against one mesh.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/fixture"
	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/exporter"
	"github.com/agentmesh/agentmesh/pkg/exporter/redact"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajectory/trajectorytest"
	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/exports/consent"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/sweeper"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// exportEnv is what an export test reads the mesh's state through.
type exportEnv struct {
	js      jetstream.JetStream
	consent *consent.Store
	records *exports.Records
	store   trajstore.Store
}

func openExportEnv(t *testing.T, srv *server.Server) exportEnv {
	t.Helper()
	ctx := context.Background()
	_, js := natstest.Connect(t, srv)
	grants, err := consent.Open(ctx, js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	records, err := exports.Open(ctx, js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(ctx, subject.Names{}.TrajectoryStore())
	if err != nil {
		t.Fatal(err)
	}
	return exportEnv{js: js, consent: grants, records: records, store: trajstore.NewObjectStore(js, obj)}
}

// exportingConfig is a mesh with export enabled whose sweeper sweeps only
// on request (and once at start).
func exportingConfig(retention time.Duration) mesh.Config {
	return mesh.Config{
		Export:  exports.Settings{Enabled: true, Retention: retention},
		Sweeper: sweeper.Config{Exports: &sweeper.ExportsConfig{Every: time.Hour}},
	}
}

// exportsSettled waits until the exporters have handled every run record
// written so far: their shared consumer has nothing pending or unacked.
func exportsSettled(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	natstest.Eventually(t, 30*time.Second, func() error {
		cons, err := js.Consumer(context.Background(), "KV_"+subject.Names{}.RunsBucket(), subject.Names{}.ExporterConsumer())
		if err != nil {
			return err
		}
		info := cons.CachedInfo()
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("exporter consumer: %d pending, %d unacked", info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

func runAs(t *testing.T, c *client.Client, principal string, req any) string {
	t.Helper()
	rr := runReq(t, req)
	rr.Principal = principal
	id, _ := clienttest.Run(t, c, rr)
	// The record follows the terminal event (the ending protocol); the
	// exporters react to the record.
	natstest.Eventually(t, 10*time.Second, func() error {
		rec, err := c.Status(context.Background(), tenant, id)
		if err == nil && !rec.State.Terminal() {
			err = fmt.Errorf("record of %s is %s", id, rec.State)
		}
		return err
	})
	return id
}

func sweepNow(t *testing.T, srv *server.Server) sweeper.SweepReply {
	t.Helper()
	nc, _ := natstest.Connect(t, srv)
	msg, err := nc.Request(subject.Names{}.ExportsSweep(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var reply sweeper.SweepReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		t.Fatalf("sweep reply %q: %v", msg.Data, err)
	}
	return reply
}

func exportedRuns(t *testing.T, env exportEnv) []string {
	t.Helper()
	entries, err := env.records.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		if !e.Record.Stored {
			t.Errorf("export %s is not stored: %+v", e.Record.RunID, e.Record)
		}
		ids = append(ids, e.Record.RunID)
	}
	slices.Sort(ids)
	return ids
}

// storedTrajectory reads a run's raw stored bytes, checks them against
// their record and the schema, and decodes them.
func storedTrajectory(t *testing.T, env exportEnv, runID string) ([]byte, *trajectory.Trajectory) {
	t.Helper()
	ctx := context.Background()
	e, err := env.records.Get(ctx, tenant, runID)
	if err != nil {
		t.Fatal(err)
	}
	data, err := env.store.Get(ctx, e.Record.Object)
	if err != nil {
		t.Fatal(err)
	}
	if trajstore.SHA256(data) != e.Record.SHA256 || int64(len(data)) != e.Record.Size {
		t.Fatalf("stored bytes of %s do not match their record %+v", runID, e.Record)
	}
	if want, _ := trajstore.Name(tenant, runID, e.Record.SHA256); e.Record.Object != want {
		t.Errorf("object %q, want %q", e.Record.Object, want)
	}
	trajectorytest.Validate(t, data)
	tr, err := trajectory.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return data, tr
}

// TestExportEnablementAndConsent: only the run that was enabled and
// granted when it was accepted is exported; a grant never reaches back; a
// withdrawal makes the sweeper remove the export, bytes then record.
func TestExportEnablementAndConsent(t *testing.T) {
	srv := natstest.RunJetStream(t)
	ctx := context.Background()
	c := newClient(t, srv)

	// Disabled operator, granted principal.
	disabled := startNode(t, srv, mesh.Config{})
	env := openExportEnv(t, srv)
	if _, err := env.consent.Grant(ctx, tenant, "alice"); err != nil {
		t.Fatal(err)
	}
	disabledGranted := runAs(t, c, "alice", fixtureReq{Prompt: "disabled and granted"})
	disabled.stop()
	if err := <-disabled.done; err != nil {
		t.Fatal(err)
	}
	disabled.done <- nil // for its cleanup

	// Enabled operator: the exporter's consumer also sees the run above.
	startNode(t, srv, exportingConfig(time.Hour))
	enabledNone := runAs(t, c, "bob", fixtureReq{Prompt: "enabled, no grant"})
	enabledGranted := runAs(t, c, "alice", fixtureReq{Prompt: "enabled and granted"})
	grantAfter := runAs(t, c, "carol", fixtureReq{Prompt: "granted after the run"})
	if _, err := env.consent.Grant(ctx, tenant, "carol"); err != nil {
		t.Fatal(err)
	}
	carolLater := runAs(t, c, "carol", fixtureReq{Prompt: "granted before this run"})
	exportsSettled(t, env.js)

	want := []string{enabledGranted, carolLater}
	slices.Sort(want)
	if got := exportedRuns(t, env); !slices.Equal(got, want) {
		t.Fatalf("exported %v, want only %v (not disabled+granted %s, enabled+none %s, grant-after %s)",
			got, want, disabledGranted, enabledNone, grantAfter)
	}
	_, tr := storedTrajectory(t, env, enabledGranted)
	if tr.RunID != enabledGranted || tr.Principal != "alice" {
		t.Errorf("trajectory of %s: %+v", enabledGranted, tr)
	}
	aliceExport, err := env.records.Get(ctx, tenant, enabledGranted)
	if err != nil {
		t.Fatal(err)
	}

	// Nothing is expired yet: a sweep keeps both.
	if r := sweepNow(t, srv); r.Swept != 0 || r.Kept != 2 || r.Error != "" {
		t.Fatalf("sweep before the withdrawal: %+v, want 2 kept", r)
	}
	if _, err := env.consent.Withdraw(ctx, tenant, "alice"); err != nil {
		t.Fatal(err)
	}
	if r := sweepNow(t, srv); r.Swept != 1 || r.Kept != 1 || r.Pending != 0 || r.Error != "" {
		t.Fatalf("sweep after alice withdrew: %+v, want 1 swept, 1 kept", r)
	}
	if got := exportedRuns(t, env); !slices.Equal(got, []string{carolLater}) {
		t.Fatalf("after the withdrawal: exports %v, want carol's %s only", got, carolLater)
	}
	if ok, err := env.store.Exists(ctx, aliceExport.Record.Object); err != nil || ok {
		t.Fatalf("alice's trajectory bytes still stored (%v, %v)", ok, err)
	}
	// A new grant does not bring the removed export back, and exports
	// alice's next run.
	if _, err := env.consent.Grant(ctx, tenant, "alice"); err != nil {
		t.Fatal(err)
	}
	again := runAs(t, c, "alice", fixtureReq{Prompt: "granted again"})
	exportsSettled(t, env.js)
	want = []string{again, carolLater}
	slices.Sort(want)
	if got := exportedRuns(t, env); !slices.Equal(got, want) {
		t.Fatalf("after granting again: exports %v, want %v", got, want)
	}
	if r := sweepNow(t, srv); r.Swept != 0 {
		t.Fatalf("a sweep after the new grant removed %d exports; the new grant's export stays", r.Swept)
	}
}

// secretsOfEachKind is one seeded secret of every built-in kind, none a
// live credential.
var secretsOfEachKind = map[string]string{
	"builtin:openai_api_key":        "sk-proj-Zx81kqQ0a9VbNmPoIuYtRe3WsXcD5f6g7h8j9k0lMnBvCx",
	"builtin:anthropic_api_key":     "sk-ant-api03-Qw3rTyUi0pAsDfGh1jKlZxCvBnM2qW3eR4tY5uI6oP7aS8dF9gH0jKAA",
	"builtin:google_api_key":        "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
	"builtin:bearer_token":          "8f14e45fceea167a5a36dedd4bea2543v2",
	"builtin:jwt":                   "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJVadQssw5c",
	"builtin:pem_private_key":       "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi",
	"builtin:url_credentials":       "s3cr3tP4ssw0rd",
	"builtin:aws_access_key_id":     "AKIAIOSFODNN7EXAMPLE",
	"builtin:aws_secret_access_key": "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY",
	"builtin:github_token":          "ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ",
}

// secretText carries every secret of secretsOfEachKind in its usual
// context.
func secretText() string {
	s := secretsOfEachKind
	return strings.Join([]string{
		"OPENAI_API_KEY=" + s["builtin:openai_api_key"],
		"x-api-key: " + s["builtin:anthropic_api_key"],
		"https://maps.example.com/api?key=" + s["builtin:google_api_key"],
		"Authorization: Bearer " + s["builtin:bearer_token"],
		"token " + s["builtin:jwt"],
		"-----BEGIN RSA PRIVATE KEY-----\n" + s["builtin:pem_private_key"] + "\n-----END RSA PRIVATE KEY-----",
		"postgres://app:" + s["builtin:url_credentials"] + "@db.internal:5432/app",
		"aws_access_key_id = " + s["builtin:aws_access_key_id"],
		"aws_secret_access_key = " + s["builtin:aws_secret_access_key"],
		"GITHUB_TOKEN=" + s["builtin:github_token"],
	}, "\n")
}

// TestExportRedactsSecrets: a secret of each built-in kind in the prompt,
// a tool input, a tool output, a stderr tail, an error message, a label
// and a tenant rule's match is absent from the raw stored bytes and
// counted in the redaction record.
func TestExportRedactsSecrets(t *testing.T) {
	secrets := secretText()
	dir := t.TempDir()
	script := map[string]any{
		"chunks": []map[string]any{
			{"type": "system", "metadata": map[string]any{"provider": "fixture", "model": "fixture-1"}},
			{"type": "tool_use", "tool_name": "shell", "tool_id": "toolu_1", "tool_input": map[string]any{"cmd": secrets, "env": []any{secrets}}},
			{"type": "tool_result", "tool_id": "toolu_1", "tool_output": map[string]any{"stdout": secrets}},
			{"type": "text", "content": "ticket TKT-123456 and " + secrets},
		},
		"error": map[string]any{"class": "ProviderProcessError", "message": "crashed: " + secrets, "retryable": false, "stderr_tail": secrets},
	}
	b, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secrets.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	fx, err := fixture.New(fixture.Config{ScriptsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.RunJetStream(t)
	startNodeWith(t, srv, exportingConfig(time.Hour), profile.Builtin(), fx)
	env := openExportEnv(t, srv)
	ctx := context.Background()
	if _, err := env.consent.Grant(ctx, tenant, "alice"); err != nil {
		t.Fatal(err)
	}
	rules := mustRules(t, srv)
	if err := rules.Set(ctx, tenant, []redact.Rule{{Name: "ticket", Pattern: `TKT-[0-9]{6}`}}); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv)
	rr := runReq(t, map[string]any{"prompt": "deploy with " + secrets, "script": "secrets"})
	rr.Labels = map[string]string{"note": "key " + secretsOfEachKind["builtin:aws_access_key_id"]}
	id, err := c.Submit(ctx, rr)
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, id)
	if st := last(evs); st.State != wire.StateFailed || st.Error == nil || st.Error.StderrTail == "" {
		t.Fatalf("run ended %+v, want failed with the script's error and its stderr tail", st)
	}
	natstest.Eventually(t, 30*time.Second, func() error {
		e, err := env.records.Get(ctx, tenant, id)
		if err == nil && !e.Record.Stored {
			err = errors.New("export record not stored yet")
		}
		return err
	})
	data, tr := storedTrajectory(t, env, id)
	if testing.Verbose() {
		t.Logf("stored trajectory: %s", data)
	}
	for kind, secret := range secretsOfEachKind {
		if strings.Contains(string(data), secret) {
			t.Errorf("the stored trajectory holds the %s secret %q", kind, secret)
		}
	}
	if strings.Contains(string(data), "TKT-123456") {
		t.Error("the stored trajectory holds what the tenant's rule matches")
	}
	counts := map[string]int{}
	for _, f := range tr.Redaction.Rules {
		counts[f.Rule] = f.Count
	}
	// The prompt, the tool input (twice), the tool output and the text
	// (5); the error message and stderr tail add 2 for the kinds the
	// runner's own error redaction (pkg/wire) leaves to the exporter: it
	// masks API keys, bearer tokens and GitHub tokens in errors before
	// they are published at all.
	for kind := range secretsOfEachKind {
		if counts[kind] < 5 {
			t.Errorf("redaction record counts %s %d times, want at least 5: %v", kind, counts[kind], counts)
		}
	}
	if strings.Count(string(data), "[REDACTED]") != 10 {
		t.Errorf("want the 5 secrets the runner masked in each of the error message and stderr tail")
	}
	if counts["ticket"] != 1 {
		t.Errorf("tenant rule counted %d times, want 1: %v", counts["ticket"], counts)
	}
}

// TestExportScaleOut: two exporters and two sweepers against one mesh.
// Each consented run is exported exactly once, and each expired export is
// removed exactly once.
func TestExportScaleOut(t *testing.T) {
	srv := natstest.RunJetStream(t)
	ctx := context.Background()
	// Retention is short and both sweepers sweep every second, racing.
	cfg := mesh.Config{
		Export:  exports.Settings{Enabled: true, Retention: 3 * time.Second},
		Sweeper: sweeper.Config{Exports: &sweeper.ExportsConfig{Every: time.Second}},
	}
	nodes := []*node{startNode(t, srv, cfg), startNode(t, srv, cfg)}
	env := openExportEnv(t, srv)
	if _, err := env.consent.Grant(ctx, tenant, "alice"); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv)
	const n = 30
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			rr := runReq(t, fixtureReq{Prompt: fmt.Sprintf("run %d", i)})
			if i%3 == 2 {
				rr.Principal = "bob" // not consented
			}
			id, err := c.Submit(ctx, rr)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = id
			if st, err := c.Wait(ctx, tenant, id); err != nil || st.State != wire.StateSucceeded {
				t.Errorf("run %s: %+v, %v", id, st, err)
			}
		})
	}
	wg.Wait()
	consented := n - n/3
	sum := func(get func(*node) float64) float64 {
		var s float64
		for _, nd := range nodes {
			s += get(nd)
		}
		return s
	}
	natstest.Eventually(t, 60*time.Second, func() error {
		exported := sum(func(nd *node) float64 { return testutil.ToFloat64(nd.d.Metrics.Exports.WithLabelValues("exported")) })
		swept := sum(func(nd *node) float64 {
			return testutil.ToFloat64(nd.d.Metrics.ExportsSwept.WithLabelValues(exports.ReasonRetention))
		})
		if int(exported) != consented || int(swept) != consented {
			return fmt.Errorf("%v exported, %v swept; want %d of each", exported, swept, consented)
		}
		return nil
	})
	exportsSettled(t, env.js)
	// Give the racing sweepers another round each: still exactly once.
	time.Sleep(2 * time.Second)
	for _, outcome := range []string{"exported"} {
		if got := sum(func(nd *node) float64 { return testutil.ToFloat64(nd.d.Metrics.Exports.WithLabelValues(outcome)) }); int(got) != consented {
			t.Errorf("%s: %v over both exporters, want %d", outcome, got, consented)
		}
	}
	if got := sum(func(nd *node) float64 {
		return testutil.ToFloat64(nd.d.Metrics.ExportsSwept.WithLabelValues(exports.ReasonRetention))
	}); int(got) != consented {
		t.Errorf("swept %v over both sweepers, want %d", got, consented)
	}
	if got := exportedRuns(t, env); len(got) != 0 {
		t.Errorf("export records left after retention: %v", got)
	}
	obj, err := env.js.ObjectStore(ctx, subject.Names{}.TrajectoryStore())
	if err != nil {
		t.Fatal(err)
	}
	if list, err := obj.List(ctx); !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Errorf("objects left after retention: %d (%v)", len(list), err)
	}
}

func mustRules(t *testing.T, srv *server.Server) *exporter.Rules {
	t.Helper()
	_, js := natstest.Connect(t, srv)
	rules, err := exporter.OpenRules(context.Background(), js, subject.Names{})
	if err != nil {
		t.Fatal(err)
	}
	return rules
}
