//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli/claudecode"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/fakemodel"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/chromedp/chromedp"
)

// consoleChromium is Debian's Chromium, which make e2e-cli installs
// (apt-get install chromium) when it is missing.
const consoleChromium = "/usr/bin/chromium"

// The console test's tenant and principal, and the fixture profile's
// prices it runs with (the shipped profile's are zero, so its runs would
// cost nothing): USD per million tokens.
const (
	consoleTenant    = "console-e2e"
	consolePrincipal = "browser"
	consolePricing   = `pricing: {input: "3.75", output: "15.5"}`
)

// TestConsole drives the console of `agentmesh up --gateway` in a real
// browser, headless Chromium driven over the DevTools protocol by
// chromedp (issue 26, acceptance 1): it signs in with a key from
// `agentmesh keys create` through the login form; loads the runs list and
// finds the two fixture runs made before; sees a run submitted after the
// list loaded (Claude Code against the fake model API, on a pushed
// workspace) appear in it and end, without a reload (issue 37); opens
// that run's page and downloads its patch and archive through their
// links, their SHA-256 and size the page's; opens the page of a run that
// streams slowly (the fixture's slow script, one chunk a second) and sees
// its chunks arrive while it runs; cancels it with the page's button and
// sees the terminal state cancelled; and loads the spend chart, whose
// total and today's bar hold the day's exact sum that `agentmesh spend
// --json` prints. No page writes an error or an exception to the console.
// Each step leaves a full-page screenshot in .cache/console-e2e/ for a
// person to look at. Under make e2e-cli (E2E_CLI_CACHE set) Chromium must
// be there; otherwise the test skips without it.
func TestConsole(t *testing.T) {
	needChromium(t)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	shots := filepath.Join(repo, ".cache", "console-e2e")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	bin := buildAgentmesh(t, repo, root)
	tag := fmt.Sprintf("console-%d-%d", os.Getpid(), time.Now().UnixNano())
	// Registered first, so it runs last: after up has stopped and the
	// browser has closed, no process of up, agentmesh run or Chromium
	// survives.
	t.Cleanup(func() { checkReaped(t, tag+"/") })

	fixture, err := os.ReadFile(filepath.Join(repo, "profiles", "fixture.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	priced := strings.Replace(string(fixture), `pricing: {input: "0", output: "0"}`, consolePricing, 1)
	if priced == string(fixture) {
		t.Fatalf("profiles/fixture.yaml has no zero pricing line to replace with %s", consolePricing)
	}
	profiles := mkdir(t, root, "profiles")
	write(t, filepath.Join(profiles, "fixture.yaml"), priced)
	// Claude Code, pointed at the fake model API, runs the run with a
	// workspace (issue 37): a real agent CLI under the sandbox, whose
	// ended run stores its patch and archive.
	claude := clis[0]
	if claude.name != claudecode.Name {
		t.Fatalf("clis[0] is %s, want %s", claude.name, claudecode.Name)
	}
	if _, err := exec.LookPath(claude.binary); err != nil {
		t.Fatalf("%s not on PATH (%s); `make e2e-cli` installs it", claude.binary, claude.hint)
	}
	profileYAML, err := os.ReadFile(filepath.Join(repo, "profiles", claude.name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(profiles, claude.name+".yaml"), string(profileYAML))
	fake := fakemodel.New(fakemodel.Auto)
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })

	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": mkdir(t, root, "home"), "TMPDIR": mkdir(t, root, "tmp")}
	workRoot := mkdir(t, root, "work")
	ce := cliEnv{home: env["HOME"], tmp: env["TMPDIR"], workRoot: workRoot, fakeURL: fake.URL(), tag: tag + "/up"}
	upEnv := merge(env, ce.base(), claude.configure(t, ce), map[string]string{"AGENTMESH_SANDBOX": "on"})
	upLog, stop := startUp(t, bin, upEnv,
		"--listen", "127.0.0.1:0", "--http", "", "--gateway", "127.0.0.1:0",
		"--data-dir", filepath.Join(root, "data"),
		"--profiles-dir", profiles,
		"--fixture-dir", filepath.Join(repo, "testdata", "fixture"),
		"--workspace-root", workRoot)
	natsURL, gatewayAddr := upAddrs(t, upLog)
	base := "http://" + gatewayAddr
	waitForRouter(t, natsURL, upLog)
	defer func() {
		if t.Failed() {
			t.Logf("agentmesh up log:\n%s", upLog.String())
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cliEnv := merge(env, map[string]string{
		"AGENTMESH_NATS_URL": natsURL, "AGENTMESH_TENANT": consoleTenant, "AGENTMESH_PRINCIPAL": consolePrincipal,
		tagVar: tag + "/cli",
	})
	cli := func(args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = environ(cliEnv)
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			t.Fatalf("agentmesh %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	key := strings.TrimSpace(cli("keys", "create", "--tenant", consoleTenant, "--principal", consolePrincipal))

	// Two runs that end before the browser starts, with usage and so cost.
	stamp := time.Now().UnixNano()
	done := []string{fmt.Sprintf("console-done-a-%d", stamp), fmt.Sprintf("console-done-b-%d", stamp)}
	for i, id := range done {
		out := cli("run", "-p", "fixture", "--run-id", id, fmt.Sprintf("What does the console show? (run %d of the browser test)", i+1))
		t.Logf("agentmesh run %s:\n%s", id, out)
	}

	// The browser: Debian's Chromium, headless, with a fresh profile, and
	// none of its own connections (this machine refuses them).
	bctx, bcancel := newConsoleBrowser(t, root, tag)
	defer bcancel()
	msgs := watchConsole(bctx)
	step := 0
	shot := func(name string) {
		t.Helper()
		step++
		png, err := runFor(bctx, 30*time.Second, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(shots, fmt.Sprintf("%02d-%s.png", step, name))
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", p)
	}
	do := func(what string, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := runFor(bctx, d, chromedp.Steps(steps...)); err != nil {
			shot("failed")
			page, _ := runFor(bctx, 5*time.Second, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Fatalf("%s: %v; the page is\n%s", what, err, page)
		}
	}
	// The page's state as the test reads it: one Evaluate, so every field
	// is of the same moment.
	type runPage struct {
		State, Stream, Output, Cancel string
		Events                        []string
	}
	readRun := func() runPage {
		t.Helper()
		p, err := runFor(bctx, 10*time.Second, chromedp.Evaluate[runPage](`({
			State: document.getElementById("state").textContent,
			Stream: document.getElementById("stream-state").textContent,
			Output: document.getElementById("output").textContent,
			Cancel: document.getElementById("cancel-result").textContent,
			Events: Array.from(document.querySelectorAll("#events .event"), e => e.textContent),
		})`))
		if err != nil {
			t.Fatalf("read the run page: %v", err)
		}
		return p
	}

	// Sign in through the form.
	if err := consoleSignIn(bctx, base, key); err != nil {
		shot("failed")
		t.Fatalf("sign in: %v", err)
	}
	shot("signed-in")
	msgs.check(t, "the login form")

	// The runs list: both ended runs, succeeded, in this tenant. The
	// index follows the runs bucket, so the page is reloaded until it has
	// caught up.
	type listed struct{ ID, State, Tenant string }
	var rows []listed
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err = runFor(bctx, 10*time.Second, chromedp.Evaluate[[]listed](`Array.from(
			document.querySelectorAll("#runs tr.run"),
			r => ({ID: r.querySelector("a").textContent, State: r.dataset.state, Tenant: r.cells[1].textContent}))`))
		if err != nil {
			t.Fatalf("read the runs list: %v", err)
		}
		n := 0
		for _, r := range rows {
			if slices.Contains(done, r.ID) && r.State == "succeeded" && r.Tenant == consoleTenant {
				n++
			}
		}
		if n == len(done) {
			break
		}
		if time.Now().After(deadline) {
			shot("failed")
			t.Fatalf("the runs list shows %+v, want %q succeeded in tenant %s", rows, done, consoleTenant)
		}
		time.Sleep(250 * time.Millisecond) // the index is another process's
		do("reload the runs list", 30*time.Second, chromedp.Navigate(base+"/console/runs"), chromedp.WaitVisible(chromedp.ID("runs")))
	}
	shot("runs")
	msgs.check(t, "the runs list")

	// The runs list is live (issue 37): a run submitted after the page
	// loaded shows, then its end, with no reload (the marker the test
	// sets on the page's window survives only if the page is the same).
	do("mark the loaded runs list", 10*time.Second, chromedp.Evaluate[chromedp.Void](`window.consoleE2E = "loaded"`))
	natstest.Eventually(t, 10*time.Second, func() error {
		s, err := runFor(bctx, 5*time.Second, chromedp.Evaluate[string](`document.getElementById("live-state").textContent`))
		if err != nil || !strings.HasPrefix(s, "live:") {
			return fmt.Errorf("the runs list's live state reads %q (%v)", s, err)
		}
		return nil
	})
	src := mkdir(t, root, "ws-source")
	write(t, filepath.Join(src, "notes.txt"), "the console's workspace\n")
	wsRun := fmt.Sprintf("console-ws-%d", stamp)
	wsPrompt := fmt.Sprintf("What is the answer? (console workspace run %d)", stamp)
	out := cli("run", "-p", claude.name, "--push", src, "--run-id", wsRun, "--deadline", runDeadline.String(), wsPrompt)
	t.Logf("agentmesh run -p %s --push %s:\n%s", claude.name, src, out)
	type liveRow struct{ State, Marker string }
	var row liveRow
	deadline = time.Now().Add(30 * time.Second)
	for {
		row, err = runFor(bctx, 10*time.Second, chromedp.Evaluate[liveRow](fmt.Sprintf(`(() => {
			const r = Array.from(document.querySelectorAll("#runs tr.run")).find(r => r.dataset.key === %q);
			return {State: r ? r.dataset.state : "", Marker: String(window.consoleE2E)};
		})()`, consoleTenant+"/"+wsRun)))
		if err != nil {
			t.Fatalf("read the runs list: %v", err)
		}
		if row.Marker != "loaded" {
			t.Fatalf("the runs list was reloaded (its marker reads %q)", row.Marker)
		}
		if row.State == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			shot("failed")
			t.Fatalf("the runs list shows run %s as %q without a reload within 30s, want succeeded", wsRun, row.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	shot("runs-live")
	msgs.check(t, "the live runs list")

	// Its page lists its patch and archive, each a link that downloads
	// with the page's cookie: the bytes' SHA-256 and size are the page's.
	do("open the workspace run's page", 30*time.Second,
		chromedp.Navigate(base+"/console/runs/"+consoleTenant+"/"+wsRun),
		chromedp.WaitVisible(chromedp.ID("artifacts")))
	type artifactRow struct {
		Name, Href, Size, SHA256 string
		Got                      struct {
			Status, Size int
			SHA256       string
		}
	}
	arts, err := runFor(bctx, 30*time.Second, chromedp.Evaluate[[]artifactRow](`Promise.all(Array.from(
		document.querySelectorAll("#artifacts tr.artifact"), async r => {
			const a = r.querySelector("a");
			const resp = await fetch(a.href, {credentials: "same-origin"});
			const b = await resp.arrayBuffer();
			const d = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", b)), x => x.toString(16).padStart(2, "0")).join("");
			return {Name: a.textContent, Href: a.getAttribute("href"), Size: r.cells[1].textContent, SHA256: r.cells[2].textContent,
				Got: {Status: resp.status, Size: b.byteLength, SHA256: d}};
		}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("read and download the artifacts: %v", err)
	}
	t.Logf("artifacts: %+v", arts)
	names := map[string]bool{}
	for _, a := range arts {
		names[a.Name] = true
		if a.Href != "/console/runs/"+consoleTenant+"/"+wsRun+"/artifacts/"+a.Name || a.Got.Status != http.StatusOK ||
			a.Got.SHA256 != a.SHA256 || fmt.Sprint(a.Got.Size) != a.Size {
			t.Errorf("artifact %s: the page says %s bytes, sha256 %s at %s; its link gave %+v", a.Name, a.Size, a.SHA256, a.Href, a.Got)
		}
	}
	if !names["workspace.patch"] || !names["workspace.tar.gz"] || len(arts) != 2 {
		t.Errorf("the run page lists artifacts %v, want workspace.patch and workspace.tar.gz", names)
	}
	shot("run-artifacts")
	msgs.check(t, "the workspace run's page")

	// A run that streams slowly: the fixture's slow script, 20 chunks one
	// second apart, submitted from the command line and followed there.
	stream := fmt.Sprintf("console-stream-%d", stamp)
	follower := exec.CommandContext(ctx, bin, "run", "-p", "fixture", "--script", "slow", "--delay-ms", "1000",
		"--run-id", stream, "Tick slowly for the browser.")
	follower.Env = environ(cliEnv)
	var followOut bytes.Buffer
	follower.Stdout, follower.Stderr = &followOut, &followOut
	follower.WaitDelay = 10 * time.Second
	if err := follower.Start(); err != nil {
		t.Fatal(err)
	}
	followed := make(chan error, 1)
	go func() { followed <- follower.Wait() }()
	defer func() {
		if follower.ProcessState == nil {
			_ = follower.Process.Kill()
			<-followed
		}
	}()
	natstest.Eventually(t, 30*time.Second, func() error {
		rec, err := getRun(ctx, base, key, stream)
		if err != nil {
			return err
		}
		if rec.State != "running" {
			return fmt.Errorf("run %s is %s, not running yet", stream, rec.State)
		}
		return nil
	})
	do("open the streaming run's page", 30*time.Second,
		chromedp.Navigate(base+"/console/runs/"+consoleTenant+"/"+stream),
		chromedp.WaitVisible(chromedp.ID("events")))

	// Its chunks arrive: at least two, then at least one more while the
	// page still shows the run running, each a distinct tick in the output.
	chunkLines := func(p runPage) int {
		n := 0
		for _, e := range p.Events {
			if strings.Contains(e, " chunk text") {
				n++
			}
		}
		return n
	}
	ticks := func(p runPage) []string {
		var out []string
		for l := range strings.SplitSeq(p.Output, "\n") {
			if l != "" && !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
		return out
	}
	waitRun := func(what string, d time.Duration, ok func(runPage) bool) runPage {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			p := readRun()
			if ok(p) {
				return p
			}
			if time.Now().After(deadline) {
				shot("failed")
				t.Fatalf("the run page: %s not within %s: %+v", what, d, p)
			}
			time.Sleep(50 * time.Millisecond) // the page's own EventSource
		}
	}
	first := waitRun("two chunks", 30*time.Second, func(p runPage) bool { return chunkLines(p) >= 2 })
	if first.State != "running" || first.Stream != "streaming" {
		t.Fatalf("two chunks shown, but the run page reads state %q, stream %q; want running and streaming (the slow script has 20 chunks a second apart)", first.State, first.Stream)
	}
	live := waitRun("a chunk arriving live", 10*time.Second, func(p runPage) bool { return chunkLines(p) > chunkLines(first) })
	if live.State != "running" {
		t.Fatalf("a chunk arrived but the page reads state %q, want running", live.State)
	}
	if got := ticks(live); len(got) < 2 || got[0] != "tick 1" || got[1] != "tick 2" {
		t.Fatalf("the output shows %q, want distinct ticks starting tick 1, tick 2", got)
	}
	t.Logf("streaming: %d chunk events then %d, output %q", chunkLines(first), chunkLines(live), live.Output)
	shot("run-streaming")
	msgs.check(t, "the streaming run's page")

	// Cancel it from the page: the run ends cancelled, the page says so
	// (the state, the stream's end, the button's answer) and the ticks stop.
	do("click cancel", 10*time.Second, chromedp.Click(chromedp.ID("cancel")))
	// The stream's terminal status and the button's answer race: both
	// are waited for.
	end := waitRun("the terminal state cancelled", 30*time.Second, func(p runPage) bool {
		return p.State == "cancelled" && p.Stream == "ended: cancelled" && p.Cancel != "" && p.Cancel != "cancelling…"
	})
	if end.Cancel != "cancelled" {
		t.Errorf("the cancel button's answer reads %q, want cancelled", end.Cancel)
	}
	if !slices.ContainsFunc(end.Events, func(e string) bool { return strings.HasSuffix(e, " status cancelled") }) {
		t.Errorf("the events list %q has no status cancelled", end.Events)
	}
	if got := ticks(end); slices.Contains(got, "tick 20") {
		t.Errorf("the output %q reached the script's last tick: the run was not cancelled mid-stream", got)
	}
	if disabled, err := runFor(bctx, 10*time.Second, chromedp.Evaluate[bool](`document.getElementById("cancel").disabled`)); err != nil || !disabled {
		t.Errorf("the cancel button is not disabled after the run ended (%v)", err)
	}
	t.Logf("cancelled after %d chunk events; events %q", chunkLines(end), end.Events)
	shot("run-cancelled")
	msgs.check(t, "the cancelled run's page")
	if rec, err := getRun(ctx, base, key, stream); err != nil || rec.State != "cancelled" {
		t.Errorf("GET /v1/runs/%s: %+v, %v; want state cancelled", stream, rec, err)
	}
	select {
	case err := <-followed:
		t.Logf("agentmesh run %s (%v):\n%s", stream, err, followOut.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("agentmesh run %s still follows its cancelled run:\n%s", stream, followOut.String())
	}

	// The spend chart: the ledger rolls the four runs up (the cancelled
	// one too), and the day's exact sum from agentmesh spend --json is the
	// page's total, today's row and today's bar.
	today := time.Now().UTC()
	type spendRow struct {
		Key  string `json:"key"`
		Runs int64  `json:"runs"`
		Cost string `json:"cost"`
	}
	var spend struct {
		Total spendRow   `json:"total"`
		Rows  []spendRow `json:"rows"`
	}
	natstest.Eventually(t, 30*time.Second, func() error {
		out := cli("spend", "--tenant", consoleTenant, "--since", today.Format(time.DateOnly), "--by", "day", "--json")
		if err := json.Unmarshal([]byte(out), &spend); err != nil {
			return fmt.Errorf("agentmesh spend --json: %v\n%s", err, out)
		}
		if spend.Total.Runs != 4 || len(spend.Rows) != 1 {
			return fmt.Errorf("agentmesh spend --json: %s, want the four runs of today", out)
		}
		return nil
	})
	day := spend.Rows[0]
	if day.Key != today.Format(time.DateOnly) || day.Cost != spend.Total.Cost || day.Cost == "" || day.Cost == "0" {
		t.Fatalf("agentmesh spend --json: today %+v, total %+v; want a non-zero cost for %s", day, spend.Total, today.Format(time.DateOnly))
	}
	t.Logf("agentmesh spend --json: %s, %d runs, %s USD", day.Key, day.Runs, day.Cost)
	do("load the spend page", 30*time.Second,
		chromedp.Navigate(base+"/console/spend"),
		chromedp.WaitVisible(chromedp.ID("spend-chart")))
	type spendPage struct {
		Total string
		Rows  [][]string
		Bars  []string
	}
	sp, err := runFor(bctx, 10*time.Second, chromedp.Evaluate[spendPage](`({
		Total: document.getElementById("spend-total").textContent,
		Rows: Array.from(document.querySelectorAll("#spend-rows tbody tr"), r => Array.from(r.cells, c => c.textContent)),
		Bars: Array.from(document.querySelectorAll("#spend-chart > g > title"), t => t.textContent),
	})`))
	if err != nil {
		t.Fatalf("read the spend page: %v", err)
	}
	t.Logf("spend page: %+v", sp)
	if sp.Total != day.Cost {
		t.Errorf("the spend page's total is %q USD, want %q (agentmesh spend --json)", sp.Total, day.Cost)
	}
	wantRow := []string{day.Key, consolePrincipal, "4", day.Cost}
	if !slices.ContainsFunc(sp.Rows, func(r []string) bool { return slices.Equal(r, wantRow) }) {
		t.Errorf("the spend rows %q lack %q", sp.Rows, wantRow)
	}
	if bar := today.Format("01-02") + ": " + day.Cost + " USD"; !slices.Contains(sp.Bars, bar) {
		t.Errorf("the chart's bars %q lack %q", sp.Bars, bar)
	}
	shot("spend")
	msgs.check(t, "the spend page")

	// Close the browser and see its process gone, then stop up.
	proc := chromedp.FromContext(bctx).Browser.Process()
	if err := chromedp.Cancel(bctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("close the browser: %v", err)
	}
	if proc != nil {
		if err := proc.Signal(syscall.Signal(0)); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("Chromium (pid %d) still runs after the browser was closed: %v", proc.Pid, err)
		}
	}
	stop()
}

// needChromium skips the test without Debian's Chromium, or fails it
// under make e2e-cli (E2E_CLI_CACHE set), which installs it.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(consoleChromium); err != nil {
		if os.Getenv("E2E_CLI_CACHE") != "" {
			t.Fatalf("%s: %v; make e2e-cli installs it (apt-get install chromium)", consoleChromium, err)
		}
		t.Skipf("%s: %v (apt-get install chromium)", consoleChromium, err)
	}
}

// consoleSignIn signs in to the console at base with key through its
// login form, and waits for the runs list it leads to.
func consoleSignIn(bctx context.Context, base, key string) error {
	_, err := runFor(bctx, 60*time.Second, chromedp.Steps(
		chromedp.Navigate(base+"/console/login"),
		chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Click(chromedp.CSS(`form.login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("runs"))))
	return err
}

// TestConsoleSession: the page of a session run (Claude Code's ACP agent
// against the fake model API, two turns: its prompt, then a follow-up
// sent when turn 1 ended) groups its chunks by turn in a real browser:
// turn 1 the answer to the run's prompt, turn 2 the follow-up's prompt
// and its answer, each ended end_turn (issue 37). No page logs an error.
func TestConsoleSession(t *testing.T) {
	needChromium(t)
	m := startACPMesh(t, "console-session", "--gateway", "127.0.0.1:0")
	_, gw := upAddrs(t, m.upLog)
	base := "http://" + gw
	defer func() {
		if t.Failed() {
			t.Logf("agentmesh up log:\n%s", m.upLog.String())
		}
	}()
	keys := exec.Command(m.bin, "keys", "create", "--tenant", tenant, "--principal", "e2e")
	keys.Env = environ(merge(m.env, map[string]string{"AGENTMESH_NATS_URL": m.natsURL, tagVar: m.tag + "/cli"}))
	out, err := keys.Output()
	if err != nil {
		t.Fatalf("agentmesh keys create: %v", err)
	}
	key := strings.TrimSpace(string(out))
	bctx, bcancel := newConsoleBrowser(t, m.root, m.tag)
	defer bcancel()
	msgs := watchConsole(bctx)
	if err := consoleSignIn(bctx, base, key); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	msgs.check(t, "the login form")

	a := acpAgents[0]
	p1 := acpPrompt(a, "What is the answer?", "console-turn-1", fakemodel.Answer)
	p2 := acpPrompt(a, "What was the answer again?", "console-turn-2", fakemodel.Answer)
	type turn struct{ Turn, Prompt, Reply, End string }
	var turns []turn
	var session bool
	m.session(t, a, p1, func(id string, ch *wire.Chunk) {
		if ch == nil || ch.Type != wire.ChunkTurnEnd {
			return
		}
		if *ch.Metadata.NumTurns == 1 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if rep, err := m.client.Send(ctx, tenant, id, p2); err != nil || rep.Turn != 2 {
				t.Errorf("Send: %+v, %v", rep, err)
				m.end(t, id)
			}
			return
		}
		defer m.end(t, id)
		if _, err := runFor(bctx, 30*time.Second, chromedp.Steps(
			chromedp.Navigate(base+"/console/runs/"+tenant+"/"+id),
			chromedp.WaitVisible(chromedp.ID("events")))); err != nil {
			t.Errorf("open the session's page: %v", err)
			return
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var err error
			turns, err = runFor(bctx, 10*time.Second, chromedp.Evaluate[[]turn](`Array.from(document.querySelectorAll("#turns .turn"), s => ({
				Turn: s.dataset.turn, Prompt: s.querySelector(".prompt").textContent,
				Reply: s.querySelector(".reply").textContent, End: (s.querySelector(".turn-end") || {}).textContent || ""}))`))
			if err != nil {
				t.Errorf("read the turns: %v", err)
				return
			}
			if len(turns) == 2 && turns[1].End != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the session's page shows turns %+v within 30s, want two ended", turns)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		session, err = runFor(bctx, 10*time.Second, chromedp.Evaluate[bool](`!document.getElementById("session").hidden`))
		if err != nil {
			t.Errorf("read the turns' section: %v", err)
		}
		png, err := runFor(bctx, 30*time.Second, chromedp.FullScreenshot(100))
		if err == nil {
			dir := filepath.Join(m.repo, ".cache", "console-e2e")
			if os.MkdirAll(dir, 0o755) == nil && os.WriteFile(filepath.Join(dir, "session-turns.png"), png, 0o644) == nil {
				t.Logf("screenshot %s", filepath.Join(dir, "session-turns.png"))
			}
		}
	})
	t.Logf("the session's turns: %+v", turns)
	if !session || len(turns) != 2 {
		t.Fatalf("the session's page: section shown %v, turns %+v; want two", session, turns)
	}
	for i, tu := range turns {
		n := fmt.Sprint(i + 1)
		if tu.Turn != n || !strings.Contains(tu.Reply, "42") || tu.End != "turn "+n+" ended: end_turn" && !strings.HasPrefix(tu.End, "turn "+n+" ended: end_turn ·") {
			t.Errorf("turn %s: %+v; want the answer, ended end_turn", n, tu)
		}
	}
	if turns[1].Prompt != "user: "+p2 {
		t.Errorf("turn 2's prompt reads %q, want the follow-up %q", turns[1].Prompt, p2)
	}
	if !strings.HasPrefix(turns[0].Prompt, "user: ") {
		t.Errorf("turn 1's prompt reads %q", turns[0].Prompt)
	}
	msgs.check(t, "the session's page")
}

// newConsoleBrowser is a chromedp context of Debian's Chromium, headless,
// with a fresh profile under root, its own HOME and the process tag, and
// without the background connections this machine refuses.
func newConsoleBrowser(t *testing.T, root, tag string) (context.Context, context.CancelFunc) {
	t.Helper()
	home := mkdir(t, root, "chromium-home")
	log := &servicetest.Buffer{}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(consoleChromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(mkdir(t, root, "chromium-profile")),
		chromedp.WindowSize(1280, 900),
		chromedp.NoInheritEnv,
		chromedp.Env("PATH="+os.Getenv("PATH"), "HOME="+home, "TMPDIR="+mkdir(t, home, "tmp"), tagVar+"="+tag+"/chromium"),
		chromedp.CombinedOutput(log),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	// Start the browser now, on the context without a timeout, which it
	// lives as long as.
	if err := chromedp.Do(bctx); err != nil {
		bcancel()
		acancel()
		t.Fatalf("start %s: %v\n%s", consoleChromium, err, log.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Chromium's output:\n%s", log.String())
		}
	})
	return bctx, func() { bcancel(); acancel() }
}

// consoleMessages collects what the pages write to the console: calls of
// the console API, uncaught exceptions and the browser log's entries.
type consoleMessages struct {
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
	seen int
}

func watchConsole(ctx context.Context) *consoleMessages {
	m := &consoleMessages{}
	messages := chromedp.Console(ctx)
	go func() {
		for msg, err := range messages {
			if err != nil {
				return
			}
			m.mu.Lock()
			m.msgs = append(m.msgs, msg)
			m.mu.Unlock()
		}
	}()
	return m
}

// check fails the test for every error or exception written since the
// last check, and logs the other messages.
func (m *consoleMessages) check(t *testing.T, page string) {
	t.Helper()
	time.Sleep(200 * time.Millisecond) // messages come as events, after the action
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, msg := range m.msgs[m.seen:] {
		// The console serves no icon, and Chromium asks for /favicon.ico
		// by itself, not from the page: the browser log's 404 for it is
		// no error of a page.
		favicon := msg.Source == "network" && strings.HasSuffix(msg.URL, "/favicon.ico")
		switch {
		case favicon:
			t.Logf("%s: the console has %s (%s), ignored", page, msg, msg.URL)
		case msg.Type == chromedp.ConsoleError || msg.IsException():
			t.Errorf("%s: the console has %s (%s:%d)", page, msg, msg.URL, msg.Line+1)
		default:
			t.Logf("%s: the console has %s", page, msg)
		}
	}
	m.seen = len(m.msgs)
}

// runFor runs one action on the browser of ctx, which lives as long as
// ctx, within d.
func runFor[T any](ctx context.Context, d time.Duration, a chromedp.Action[T]) (T, error) {
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Run(c, a)
}

// getRun reads a run's record from the gateway's runs API with key.
func getRun(ctx context.Context, base, key, id string) (wire.RunRecord, error) {
	var rec wire.RunRecord
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+id, nil)
	if err != nil {
		return rec, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rec, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return rec, err
	}
	if resp.StatusCode != http.StatusOK {
		return rec, fmt.Errorf("GET /v1/runs/%s: %s: %s", id, resp.Status, b)
	}
	return rec, json.Unmarshal(b, &rec)
}
