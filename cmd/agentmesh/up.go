package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/gateway"
	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// upOptions are the flags of agentmesh up: the embedded server's, the
// choice of services, and the directories, which replace their
// variables for every service.
type upOptions struct {
	listen     string // host:port of the NATS client listener; port 0 picks a free one
	dataDir    string // JetStream store
	http       string // metrics and health address; "" disables
	gateway    string // the HTTP gateway's address; "" disables
	console    bool   // serve the web console on the gateway
	fixtureDir string // the fixture adapter's scripts
	profiles   string // profile documents
	workspace  string // root of every CLI run's workspace
	// runnerAdapters are the adapters up's own runner hosts: nil for
	// every profile's, empty (--runner-adapters none) for none.
	runnerAdapters []string
	demo           bool   // submit and print one demo run once up
	verbose        bool   // log the NATS server's notices and debug output
	sync           string // the embedded server's sync policy
}

// demoPrompt is the prompt of the --demo run.
const demoPrompt = "hello from agentmesh"

func parseUp(args []string, io *stdio) (upOptions, error) {
	var o upOptions
	fs := newFlagSet("up", "[flags]", io)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:4222", "NATS client address host:port (port 0: any free port)")
	fs.StringVar(&o.dataDir, "data-dir", ".agentmesh", "directory of the JetStream store (locked while up runs)")
	fs.StringVar(&o.http, "http", service.DefaultHTTPAddr("up"), `address of /metrics, /healthz and /readyz ("" disables)`)
	fs.StringVar(&o.gateway, "gateway", io.envOr("AGENTMESH_GATEWAY_ADDR", gateway.DefaultAddr), `address of the OpenAI-compatible HTTP gateway, host:port (port 0: any free port; "" disables)`)
	console := true
	if v := io.getenv(consoleVar); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, usageErr("up: %s: want a boolean, got %q", consoleVar, v)
		}
		console = b
	}
	fs.BoolVar(&o.console, "console", console, "serve the web console at /console on the gateway (default from $"+consoleVar+", else true)")
	fs.StringVar(&o.fixtureDir, "fixture-dir", io.envOr("AGENTMESH_FIXTURE_DIR", "testdata/fixture"), "directory of the fixture adapter's scripts")
	fs.StringVar(&o.profiles, "profiles-dir", io.envOr("AGENTMESH_PROFILES_DIR", "profiles"), "directory of the profile documents (*.yaml)")
	fs.StringVar(&o.workspace, "workspace-root", io.envOr("AGENTMESH_WORKSPACE_ROOT", "."), "directory that contains every CLI run's workspace")
	if v := io.getenv(adaptersVar); v != "" {
		a, err := parseRunnerAdapters(v)
		if err != nil {
			return o, usageErr("up: %s: %v", adaptersVar, err)
		}
		o.runnerAdapters = a
	}
	fs.Func("runner-adapters", `comma-separated adapters up's own runner hosts, leaving the others' work to runners of their own (subprocess-runner, remote-runner); "none": it hosts none (default from $`+adaptersVar+`, else every profile's)`, func(v string) error {
		a, err := parseRunnerAdapters(v)
		o.runnerAdapters = a
		return err
	})
	fs.BoolVar(&o.demo, "demo", false, "once up, submit one demo run of the fixture profile and print it")
	fs.BoolVar(&o.verbose, "verbose", false, "log the embedded NATS server's notices and debug output")
	fs.StringVar(&o.sync, "sync", mesh.DefaultSync, `when the embedded server fsyncs what it acknowledged: "always" (before acknowledging it), or an interval such as 1s or 2m (what a power cut can take; docs/operating.md, "Sync policy")`)
	pos, err := parse(fs, args)
	if err != nil {
		return o, err
	}
	if len(pos) > 0 {
		return o, usageErr("up: unexpected argument %q", pos[0])
	}
	if _, _, err := mesh.SplitListen(o.listen); err != nil {
		return o, usageErr("up: --listen: %v", err)
	}
	if o.dataDir == "" {
		return o, usageErr("up: --data-dir must not be empty")
	}
	if _, err := mesh.ParseSync(o.sync); err != nil {
		return o, usageErr("up: --sync: %v", err)
	}
	if o.gateway != "" {
		if err := (gateway.Config{Addr: o.gateway, OperatorKeys: gateway.ParseKeyIDs(os.Getenv(gateway.OperatorKeysVar))}).Validate(); err != nil {
			return o, usageErr("up: --gateway: %v", err)
		}
	}
	return o, nil
}

// The variables of the runner's adapters and the gateway's console,
// which up's --runner-adapters and --console default to, as the
// subprocess-runner and gateway binaries read them.
const (
	adaptersVar = "AGENTMESH_RUNNER_ADAPTERS"
	consoleVar  = "AGENTMESH_GATEWAY_CONSOLE"
)

// parseRunnerAdapters reads a list of adapters, each once, or "none":
// empty, not nil.
func parseRunnerAdapters(v string) ([]string, error) {
	out := []string{}
	if v == "none" {
		return out, nil
	}
	for n := range strings.SplitSeq(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" || n == "none" || slices.Contains(out, n) {
			return nil, fmt.Errorf("want adapter names, each once, or none; got %q", v)
		}
		out = append(out, n)
	}
	return out, nil
}

// cmdUp runs the mesh until ctx ends.
func cmdUp(ctx context.Context, args []string, io *stdio) error {
	o, err := parseUp(args, io)
	if err != nil {
		return err
	}
	return up(ctx, o, io, nil)
}

// up runs the mesh (mesh.Up) with every service configured as its binary
// is, from the AGENTMESH_* environment (mesh.LoadUpConfig), and the flags
// o; it calls ready (if not nil) with the server's client URL once the
// services run, and serves until ctx ends. A bad configuration is a usage
// error.
func up(ctx context.Context, o upOptions, io *stdio, ready func(natsURL string)) error {
	cfg, err := mesh.LoadUpConfig()
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Router.LogLevel)) // checked by LoadUpConfig
	log := slog.New(slog.NewTextHandler(io.stderr, &slog.HandlerOptions{Level: level}))
	if cfg.Router.NATSAuth != (service.NATSAuth{}) {
		log.Info("agentmesh up: the NATS credential and TLS variables are left to the client commands; the services connect to the embedded server without them")
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // ends the demo, also when the mesh fails
	err = mesh.Up(ctx, cfg, mesh.UpOptions{
		Listen: o.listen, DataDir: o.dataDir, HTTP: o.http, Gateway: o.gateway, Console: o.console,
		RunnerAdapters: o.runnerAdapters, ProfilesDir: o.profiles, FixtureDir: o.fixtureDir, WorkspaceRoot: o.workspace,
		Verbose: o.verbose, Sync: o.sync,
		Ready: func(url string, d service.Deps) {
			if o.demo {
				wg.Go(func() { demo(ctx, d, io, log) })
			}
			if ready != nil {
				ready(url)
			}
		},
	}, log)
	if errors.Is(err, service.ErrConfig) {
		return &exitError{code: exitUsage, err: fmt.Errorf("up: %w", err)}
	}
	return err
}

// demo submits one run of the fixture profile and prints its events to
// stdout, until the run ends or ctx does.
func demo(ctx context.Context, d service.Deps, io *stdio, log *slog.Logger) {
	c, err := client.New(d.NC, d.Names)
	if err != nil {
		log.Error("demo", "err", err)
		return
	}
	f := runFlags{clientFlags: clientFlags{tenant: "default", principal: "local"}, profile: "fixture"}
	req, err := f.request(demoPrompt)
	if err != nil {
		log.Error("demo", "err", err)
		return
	}
	runID, err := c.Submit(ctx, req)
	if err != nil {
		log.Error("demo: submit", "err", err)
		return
	}
	out := newHumanPrinter(io.stdout, io.color)
	for ev, err := range c.Events(ctx, req.Tenant, runID, 1) {
		if err != nil {
			if ctx.Err() == nil {
				log.Error("demo: follow", "run_id", runID, "err", err)
			}
			return
		}
		if err := out.event(ev); err != nil {
			log.Error("demo: print", "err", err)
			return
		}
		if ev.Terminal() && ev.Status.State == wire.StateSucceeded {
			log.Info("demo run done; the mesh keeps serving (Ctrl-C stops it)", "try",
				fmt.Sprintf("%s run --server %s -p fixture %q", io.self, service.ConnectedURL(d.NC), "hi"))
		}
	}
}
