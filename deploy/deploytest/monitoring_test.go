package deploytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/client/clienttest"
	"github.com/agentmesh/agentmesh/pkg/exports"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// The monitoring files deploy/ ships.
const (
	alertRules = "../prometheus/alerts.yaml"
	dashboard  = "../grafana/agentmesh.json"
)

// scraped is one service's scrape: the families it exports, by name.
type scraped struct {
	name    string
	samples map[string]bool // sample names: a histogram's _bucket, _sum and _count
	types   map[string]bool // family names, from the # TYPE lines
}

// A service binary under test: what it must export and must not (a family
// another service moves).
var monitored = []struct {
	name      string
	env       map[string]string
	want, not []string
}{
	{name: "router",
		want: []string{"agentmesh_work_queue_depth", "agentmesh_admission_rejections_total", "agentmesh_runs_total", "agentmesh_run_duration_seconds", "agentmesh_dropped_messages_total"},
		not:  []string{"agentmesh_runs_in_flight", "agentmesh_chunks_total", "agentmesh_lease_expiries_total", "agentmesh_exports_total", "agentmesh_exports_pending"}},
	{name: "subprocess-runner", env: map[string]string{"AGENTMESH_RUNNER_ID": "sub-1"},
		want: []string{"agentmesh_runs_in_flight", "agentmesh_chunks_total", "agentmesh_time_to_first_chunk_seconds", "agentmesh_redeliveries_total", "agentmesh_tokens_total", "agentmesh_cost_total", "agentmesh_run_duration_seconds"},
		not:  []string{"agentmesh_work_queue_depth", "agentmesh_admission_rejections_total", "agentmesh_lease_expiries_total", "agentmesh_exports_total"}},
	{name: "remote-runner", env: map[string]string{"AGENTMESH_RUNNER_ID": "remote-1"},
		want: []string{"agentmesh_runs_in_flight", "agentmesh_chunks_total", "agentmesh_tokens_total", "agentmesh_cost_total"},
		not:  []string{"agentmesh_work_queue_depth", "agentmesh_admission_rejections_total", "agentmesh_lease_expiries_total", "agentmesh_exports_total"}},
	{name: "sweeper",
		want: []string{"agentmesh_lease_expiries_total", "agentmesh_exports_swept_total", "agentmesh_export_sweep_failures_total", "agentmesh_exports_pending", "agentmesh_tokens_total"},
		not:  []string{"agentmesh_work_queue_depth", "agentmesh_runs_in_flight", "agentmesh_chunks_total", "agentmesh_exports_total", "agentmesh_export_lag_seconds"}},
	{name: "exporter",
		want: []string{"agentmesh_exports_total", "agentmesh_export_lag_seconds", "agentmesh_dropped_messages_total"},
		not:  []string{"agentmesh_runs_total", "agentmesh_work_queue_depth", "agentmesh_runs_in_flight", "agentmesh_lease_expiries_total", "agentmesh_exports_swept_total", "agentmesh_tokens_total"}},
}

// TestMonitoring runs every service binary as it ships against one
// embedded server, with trajectory export enabled, and runs a run of two
// tenants through them. Then each service's scrape passes `promtool check
// metrics` and holds the families that service moves and none it does
// not; deploy/prometheus/alerts.yaml passes `promtool check rules`; every
// expression of the Grafana dashboard parses (as recording rules that
// `promtool check rules` checks); and every metric the rules and the
// dashboard select is in some service's scrape. promtool is the go.mod
// tool (`go tool promtool`): without it the test fails.
func TestMonitoring(t *testing.T) {
	promtool(t, "--version") // fails the test, never skips it, without promtool
	bin := buildServices(t)
	srv := natstest.RunJetStream(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	common := map[string]string{
		"AGENTMESH_NATS_URL":       srv.ClientURL(),
		"AGENTMESH_HTTP_ADDR":      "127.0.0.1:0",
		"AGENTMESH_PROFILES_DIR":   filepath.Join(root, "profiles"),
		"AGENTMESH_FIXTURE_DIR":    filepath.Join(root, "testdata", "fixture"),
		exports.EnvEnabled:         "1",
		exports.EnvArtifactRoot:    t.TempDir(),
		"AGENTMESH_LOG_LEVEL":      "info",
		"AGENTMESH_WORKSPACE_ROOT": t.TempDir(),
	}
	addrs := map[string]string{}
	for _, svc := range monitored {
		env := map[string]string{"AGENTMESH_RUNNER_STATE_DIR": t.TempDir()}
		for k, v := range common {
			env[k] = v
		}
		for k, v := range svc.env {
			env[k] = v
		}
		addrs[svc.name] = startService(t, filepath.Join(bin, svc.name), env)
	}

	c := clienttest.New(t, srv)
	for _, tn := range []string{"acme", "globex"} {
		_, evs := clienttest.Run(t, c, clienttest.FixtureRun(t, tn, map[string]any{"prompt": "hi", "script": "hello"}))
		if st := clienttest.Last(evs); st.State != wire.StateSucceeded {
			t.Fatalf("tenant %s: run %s", tn, clienttest.Describe(evs))
		}
	}

	var scrapes []scraped
	for _, svc := range monitored {
		body := get(t, "http://"+addrs[svc.name]+"/metrics")
		if out, err := promtool(t, "check", "metrics").stdin(body).run(); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("%s: promtool check metrics: %v\n%s", svc.name, err, out)
		}
		s := parseScrape(svc.name, body)
		for _, f := range svc.want {
			if !s.types[f] {
				t.Errorf("%s does not export %s", svc.name, f)
			}
		}
		for _, f := range svc.not {
			if s.types[f] {
				t.Errorf("%s exports %s, which it never moves", svc.name, f)
			}
		}
		if !s.types["agentmesh_build_info"] {
			t.Errorf("%s exports no agentmesh_build_info", svc.name)
		}
		scrapes = append(scrapes, s)
	}

	if out, err := promtool(t, "check", "rules", alertRules).run(); err != nil {
		t.Errorf("promtool check rules %s: %v\n%s", alertRules, err, out)
	}
	exprs := dashboardExprs(t)
	recording := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	writeRecordingRules(t, recording, exprs)
	if out, err := promtool(t, "check", "rules", recording).run(); err != nil {
		t.Errorf("promtool check rules on the dashboard's expressions: %v\n%s", err, out)
	}
	all := append(ruleExprs(t), exprs...)
	if len(all) < 20 {
		t.Fatalf("only %d expressions in the rules and the dashboard", len(all))
	}
	for _, e := range all {
		for _, name := range selected(t, e) {
			if !slices.ContainsFunc(scrapes, func(s scraped) bool { return s.samples[name] }) {
				t.Errorf("%q selects %s, which no service's scrape holds", e, name)
			}
		}
	}
}

// buildServices builds the service binaries into a temporary directory,
// each named as its directory under services/.
func buildServices(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, svc := range monitored {
		args = append(args, "../../services/"+svc.name)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// startService starts the binary with env added to the environment, the
// test's AGENTMESH_* and AGENT_* variables removed, and returns the address
// its "http listening" log record gives. It is stopped with SIGTERM (then
// SIGKILL after 20 s) and waited for when the test ends; it must exit 0.
func startService(t *testing.T, bin string, env map[string]string) string {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), filepath.Base(bin)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTMESH_") && !strings.HasPrefix(kv, "AGENT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile // files: no copying goroutines
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		defer logFile.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			err = <-done
			t.Errorf("%s did not stop within 20s of SIGTERM", filepath.Base(bin))
		}
		if err != nil {
			logs, _ := os.ReadFile(logPath)
			t.Errorf("%s: %v; logs:\n%s", filepath.Base(bin), err, logs)
		}
	})
	var addr string
	natstest.Eventually(t, 60*time.Second, func() error {
		select {
		case err := <-done:
			done <- err
			logs, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s exited: %v; logs:\n%s", filepath.Base(bin), err, logs)
		default:
		}
		logs, err := os.ReadFile(logPath)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(logs))
		for sc.Scan() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "http listening" && rec.Addr != "" {
				addr = rec.Addr
			}
		}
		if addr == "" {
			return fmt.Errorf("%s is not listening yet; logs:\n%s", filepath.Base(bin), logs)
		}
		// Listening comes before the components start: wait for them too.
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s /readyz: %s", filepath.Base(bin), resp.Status)
		}
		return nil
	})
	return addr
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}

// parseScrape reads the text exposition format: its # TYPE lines and the
// names of its samples.
func parseScrape(name, body string) scraped {
	s := scraped{name: name, samples: map[string]bool{}, types: map[string]bool{}}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			s.types[strings.Fields(rest)[0]] = true
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			s.samples[line[:i]] = true
		}
	}
	return s
}

// dashboardExprs are the PromQL expressions of every panel's targets,
// those of panels in rows included.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	decodeFile(t, dashboard, json.Unmarshal, &d)
	var exprs []string
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("%s: panel: %v", dashboard, err)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q has a target without an expression", dashboard, p.Title)
				}
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return exprs
}

// writeRecordingRules writes exprs as the recording rules of one group,
// for promtool to parse and check.
func writeRecordingRules(t *testing.T, path string, exprs []string) {
	t.Helper()
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	rules := make([]rule, len(exprs))
	for i, e := range exprs {
		rules[i] = rule{Record: fmt.Sprintf("agentmesh_dashboard:expr_%d", i), Expr: e}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ruleExprs are the expressions of the alert rules.
func ruleExprs(t *testing.T) []string {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct {
				Expr string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	decodeFile(t, alertRules, yaml.Unmarshal, &f)
	var exprs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// decodeFile decodes the file at path into v with decode.
func decodeFile(t *testing.T, path string, decode func([]byte, any) error, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := decode(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// selected are the metric names expr selects.
func selected(t *testing.T, expr string) []string {
	t.Helper()
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("parse %q: %v", expr, err)
		return nil
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				t.Errorf("%q selects by labels only; name the metric", expr)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

// promtoolCmd is one run of `go tool promtool`.
type promtoolCmd struct {
	cmd *exec.Cmd
}

// promtool returns a run of `go tool promtool args...` from the module;
// it fails the test at once if promtool cannot be run at all.
func promtool(t *testing.T, args ...string) *promtoolCmd {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "promtool"}, args...)...)
	if len(args) == 1 && args[0] == "--version" {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go tool promtool: %v\n%s\n(promtool is pinned in go.mod's tool block; `go mod download` fetches it)", err, out)
		}
		return nil
	}
	return &promtoolCmd{cmd: cmd}
}

func (p *promtoolCmd) stdin(s string) *promtoolCmd {
	p.cmd.Stdin = strings.NewReader(s)
	return p
}

func (p *promtoolCmd) run() (string, error) {
	out, err := p.cmd.CombinedOutput()
	return string(out), err
}
