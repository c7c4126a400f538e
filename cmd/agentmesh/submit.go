package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/client"
	"github.com/agentmesh/agentmesh/pkg/service/telemetry"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// runFlags are the flags of agentmesh run.
type runFlags struct {
	clientFlags
	profile      string
	json         bool
	script       string
	delayMS      int
	deadline     time.Duration
	conversation string
	runID        string
	workspace    string
	// snapshot, git, push and fromRun name the run's workspace source
	// (at most one): a pushed snapshot, a git remote URL[@REF], a
	// directory pushed first, or what an earlier run left.
	snapshot, git, push, fromRun string
	set                          fieldFlags
	labels                       labelFlags
}

// fieldFlags collects --set key=value request fields. A value that parses
// as JSON (a number, true, a list, an object) is taken as that; [a,b] is a
// list of a and b, each element taken the same way (["x,y"] for an
// element with a comma); anything else is a string. A key set twice is an
// error.
type fieldFlags map[string]any

func (f *fieldFlags) String() string { return fmt.Sprint(map[string]any(*f)) }

func (f *fieldFlags) Set(kv string) error {
	k, v, err := keyValue(*f, kv, "")
	if err != nil {
		return err
	}
	parsed, err := fieldValue(v)
	if err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	if *f == nil {
		*f = fieldFlags{}
	}
	(*f)[k] = parsed
	return nil
}

// keyValue splits the key=value argument of a repeatable flag collecting
// into m, refusing an empty key and one m has already; what prefixes the
// key in that error.
func keyValue[V any](m map[string]V, kv, what string) (k, v string, err error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("want key=value, got %q", kv)
	}
	if _, dup := m[k]; dup {
		return "", "", fmt.Errorf("%s%s is set twice", what, k)
	}
	return k, v, nil
}

// fieldValue reads one --set value (see fieldFlags).
func fieldValue(v string) (any, error) {
	var parsed any
	if err := json.Unmarshal([]byte(v), &parsed); err == nil {
		return parsed, nil
	}
	inner, ok := strings.CutPrefix(v, "[")
	if !ok {
		return v, nil
	}
	if inner, ok = strings.CutSuffix(inner, "]"); !ok {
		return nil, fmt.Errorf("list %q has no closing ]", v)
	}
	list := []any{}
	if strings.TrimSpace(inner) == "" {
		return list, nil
	}
	elems, err := splitList(inner)
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", v, err)
	}
	for i, el := range elems {
		el = strings.TrimSpace(el)
		switch {
		case el == "":
			return nil, fmt.Errorf("list %q: element %d is empty", v, i+1)
		case json.Unmarshal([]byte(el), &parsed) == nil:
			list = append(list, parsed)
		case strings.ContainsAny(el[:1], `"[{`):
			return nil, fmt.Errorf("list %q: element %d, %s, is not JSON", v, i+1, el)
		default:
			list = append(list, el)
		}
	}
	return list, nil
}

// splitList splits the inside of a [...] list at its commas, leaving
// those inside a quoted string or a nested list or object.
func splitList(s string) ([]string, error) {
	var out []string
	depth, start, quoted := 0, 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '[' || c == '{':
			depth++
		case (c == ']' || c == '}') && depth > 0:
			depth--
		case c == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if quoted || depth > 0 {
		return nil, errors.New("a quote or bracket is not closed")
	}
	return append(out, s[start:]), nil
}

// labelFlags collects --label key=value run labels (RunRequest.Labels),
// checked as the router checks them (wire.CheckLabels) once all are in.
type labelFlags map[string]string

func (l *labelFlags) String() string { return fmt.Sprint(map[string]string(*l)) }

func (l *labelFlags) Set(kv string) error {
	k, v, err := keyValue(*l, kv, "label ")
	if err != nil {
		return err
	}
	if *l == nil {
		*l = labelFlags{}
	}
	(*l)[k] = v
	return wire.CheckLabels(*l)
}

// maxPrompt bounds a prompt read from standard input or a file: what
// fits in a run request on the wire, with room for its other fields.
const maxPrompt = wire.MaxMessageSize - 64<<10

// parseRun parses the arguments of agentmesh run into its flags and the
// prompt: the positional arguments joined by spaces; or, when the only
// one is "-", standard input; or, when the only one is @FILE, the file's
// contents (argv caps a prompt at 128 KiB; these at maxPrompt).
func parseRun(args []string, io *stdio) (runFlags, string, error) {
	var f runFlags
	fs := newFlagSet("run", "-p <profile> [flags] <prompt | - | @FILE>", io)
	f.clientFlags.register(fs, io)
	fs.StringVar(&f.profile, "p", "", "profile: a name, an alias or provider/model (required)")
	fs.StringVar(&f.profile, "profile", "", "same as -p")
	fs.BoolVar(&f.json, "json", false, "print the events as NDJSON instead of text")
	fs.StringVar(&f.script, "script", "", "fixture script to replay (a file name under the fixture directory, without .json)")
	fs.IntVar(&f.delayMS, "delay-ms", 0, "fixture: pause before each chunk, in milliseconds")
	fs.DurationVar(&f.deadline, "deadline", 0, "deadline of the whole run, e.g. 30s (default: the router's)")
	fs.StringVar(&f.conversation, "conversation", "", "conversation key for sessions and checkpoints")
	fs.StringVar(&f.runID, "run-id", "", "run id (default: a fresh one); resubmitting an id is idempotent")
	fs.StringVar(&f.workspace, "workspace", "", "CLI adapters: the run's workspace, a directory relative to the runner's workspace root")
	fs.StringVar(&f.snapshot, "snapshot", "", "CLI adapters: run in a fresh copy of this pushed snapshot (sha256:…, from agentmesh workspace push); the run's patch and archive become its artifacts")
	fs.StringVar(&f.git, "git", "", "CLI adapters: run in a fresh shallow clone of URL[@REF], a remote of the runner's AGENTMESH_RUNNER_GIT_ALLOW (REF: a branch or tag; default the remote's HEAD)")
	fs.StringVar(&f.push, "push", "", "CLI adapters: push this directory as a snapshot, then run on it (--snapshot of what workspace push prints)")
	fs.StringVar(&f.fromRun, "from-run", "", "CLI adapters: run in the workspace an earlier run of the tenant left, whatever its end (failed, cancelled, timed out), on any runner; with --conversation it goes on from there instead of the conversation's last success")
	fs.Var(&f.set, "set", "an adapter request field as key=value (repeatable), e.g. --set approval_mode=yolo, --set include_directories=[src,docs]")
	fs.Var(&f.labels, "label", "a run label as key=value (repeatable), e.g. --label team=infra")
	pos, err := parse(fs, args)
	if err != nil {
		return f, "", err
	}
	prompt := strings.Join(pos, " ")
	if len(pos) == 1 && (prompt == "-" || strings.HasPrefix(prompt, "@")) {
		if prompt, err = readPrompt(prompt, io); err != nil {
			return f, "", err
		}
	}
	switch {
	case f.profile == "":
		return f, "", usageErr("run: -p <profile> is required")
	case prompt == "":
		return f, "", usageErr("run: a prompt is required")
	case f.delayMS < 0:
		return f, "", usageErr("run: --delay-ms must be >= 0, got %d", f.delayMS)
	case f.deadline < 0:
		return f, "", usageErr("run: --deadline must be >= 0, got %s", f.deadline)
	}
	if err := f.checkSource(); err != nil {
		return f, "", err
	}
	if f.conversation != "" {
		if err := subject.ValidToken("conversation", f.conversation); err != nil {
			return f, "", usageErr("run: --conversation: %v", err)
		}
	}
	if f.runID != "" {
		if err := subject.ValidToken("run_id", f.runID); err != nil {
			return f, "", usageErr("run: --run-id: %v", err)
		}
	}
	return f, prompt, nil
}

// io.ReadAll and io.LimitReader (the io parameter of the commands
// shadows the package).
var ioReadAll, ioLimitReader = io.ReadAll, io.LimitReader

// readPrompt reads the prompt arg names: standard input for "-", the
// file for @FILE; at most maxPrompt bytes of UTF-8.
func readPrompt(arg string, io *stdio) (string, error) {
	what, r := "standard input", io.stdin
	if arg != "-" {
		what = arg[1:]
		f, err := os.Open(what)
		if err != nil {
			return "", usageErr("run: prompt %s: %v", arg, err)
		}
		defer f.Close()
		r = f
	}
	b, err := ioReadAll(ioLimitReader(r, maxPrompt+1))
	switch {
	case err != nil:
		return "", usageErr("run: read the prompt from %s: %v", what, err)
	case len(b) > maxPrompt:
		return "", usageErr("run: the prompt in %s is over %d bytes", what, maxPrompt)
	case !utf8.Valid(b):
		return "", usageErr("run: the prompt in %s is not UTF-8 text", what)
	}
	return string(b), nil
}

// request builds the run request: the adapter's typed request {prompt,
// the fixture's script and delay_ms, and every --set field} encoded as
// msgpack; the adapter validates it strictly.
func (f *runFlags) request(prompt string) (wire.RunRequest, error) {
	m := map[string]any{"prompt": prompt}
	for k, v := range f.set {
		m[k] = v
	}
	if f.script != "" {
		m["script"] = f.script
	}
	if f.delayMS > 0 {
		m["delay_ms"] = f.delayMS
	}
	b, err := wire.Marshal(m)
	if err != nil {
		return wire.RunRequest{}, err
	}
	var runtime map[string]any
	if f.workspace != "" {
		runtime = map[string]any{"workspace": f.workspace}
	}
	var source *wire.WorkspaceSource
	switch {
	case f.snapshot != "":
		source = &wire.WorkspaceSource{Snapshot: f.snapshot}
	case f.git != "":
		url, ref := splitGitRef(f.git)
		source = &wire.WorkspaceSource{Git: &wire.GitSource{URL: url, Ref: ref}}
	case f.fromRun != "":
		source = &wire.WorkspaceSource{FromRun: f.fromRun}
	}
	return wire.RunRequest{
		Workspace:    source,
		Runtime:      runtime,
		RunID:        f.runID,
		Tenant:       f.tenant,
		Principal:    f.principal,
		Profile:      f.profile,
		Request:      msgpack.RawMessage(b),
		Conversation: f.conversation,
		DeadlineMS:   f.deadline.Milliseconds(),
		Labels:       f.labels,
	}, nil
}

// cmdRun submits a run and streams its events until it ends. When ctx ends
// (SIGINT or SIGTERM) it asks the mesh to cancel the run and goes on
// streaming to the terminal status, for at most interruptGrace after the
// mesh accepted the cancel; a run the mesh does not know (it never
// arrived) ends the command at once. Exit code 0 if the run succeeded, 1
// for any other end, 130 if interrupted before the run ended (a second
// signal kills the command).
func cmdRun(ctx context.Context, args []string, io *stdio) error {
	f, prompt, err := parseRun(args, io)
	if err != nil {
		return err
	}
	if err := f.pushOrCheckSnapshot(ctx, io); err != nil {
		return err
	}
	req, err := f.request(prompt)
	if err != nil {
		return usageErr("run: %v", err)
	}
	// With OTEL_* configuring an exporter the submission is the root
	// span of the run's trace (docs/operating.md, "Tracing"); flushed before exit.
	tracing, err := telemetry.Setup(ctx, "agentmesh-cli", slog.New(slog.NewTextHandler(io.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return usageErr("run: %v", err)
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(flush); err != nil {
			fmt.Fprintf(io.stderr, "agentmesh: run: %v\n", err)
		}
	}()
	nc, c, err := f.connect(client.WithTracing(tracing))
	if err != nil {
		return err
	}
	defer nc.Close()
	if ctx.Err() != nil {
		return interrupted("interrupted before anything was submitted")
	}
	var out printer = newHumanPrinter(io.stdout, io.color)
	if f.json {
		out = newJSONPrinter(io.stdout)
	}
	st, err := submitAndFollow(ctx, c, req, out, io)
	switch {
	case err != nil:
		return err
	case st.State == wire.StateSucceeded:
		return nil
	case ctx.Err() != nil:
		// The signal cancelled it: the shell's 128+SIGINT, as for a
		// run the mesh never ended.
		return interrupted("interrupted: run %s ended %s", req.RunID, st.State)
	}
	return failed
}

// interruptGrace bounds how long an interrupted command follows a run
// whose cancel the mesh accepted, waiting for its terminal status.
const interruptGrace = 10 * time.Second

// cancelTimeout bounds the cancel an interrupted command sends (a running
// run's cancel is answered once its transport is torn down: 5 s at most).
const cancelTimeout = 10 * time.Second

// interrupted ends a command that a signal stopped: exit code 130.
func interrupted(format string, args ...any) error {
	return &exitError{code: exitInterrupted, err: fmt.Errorf(format, args...)}
}

// submitGrace is how long an interrupted submission still waits for its
// answer.
const submitGrace = 2 * time.Second

// submitAndFollow submits req and prints its events until its terminal
// status, which it returns. When ctx ends first it cancels the run and
// keeps following it for at most interruptGrace; it stops at once when
// the cancel fails (the mesh has no such run, or no router answers).
func submitAndFollow(ctx context.Context, c *client.Client, req wire.RunRequest, out printer, io *stdio) (wire.Status, error) {
	if req.RunID == "" {
		req.RunID = client.NewRunID() // known before the submit, to report it if interrupted
	}
	// An interrupt while the submission is on its way waits submitGrace
	// for its answer: a stored run is then cancelled, not left running.
	submitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(submitGrace, cancel) })
	runID, err := c.Submit(submitCtx, req)
	stop()
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return wire.Status{}, interrupted("interrupted while submitting run %s; it may still run (agentmesh cancel %s)", req.RunID, req.RunID)
		}
		return wire.Status{}, usageErr("%v", err)
	}

	follow, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFollow()
	var wg sync.WaitGroup
	defer wg.Wait()
	done := make(chan struct{})
	defer close(done)
	wg.Go(func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		if !cancelOnInterrupt(follow, c, req.Tenant, runID, io) {
			stopFollow()
			return
		}
		t := time.NewTimer(interruptGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			fmt.Fprintf(io.stderr, "agentmesh: run %s did not end within %s of its cancel\n", runID, interruptGrace)
			stopFollow()
		}
	})

	for ev, err := range c.Events(follow, req.Tenant, runID, 1) {
		if err != nil {
			if ctx.Err() != nil {
				return wire.Status{}, interrupted("interrupted before run %s ended", runID)
			}
			return wire.Status{}, usageErr("%v", err)
		}
		if err := out.event(ev); err != nil {
			return wire.Status{}, fmt.Errorf("write: %w", err)
		}
		if ev.Terminal() {
			awaitRecord(ctx, c, req.Tenant, runID)
			return *ev.Status, nil
		}
	}
	return wire.Status{}, usageErr("run %s: the event stream ended without a terminal status", runID)
}

// recordWait bounds awaitRecord.
const recordWait = 2 * time.Second

// awaitRecord waits, briefly and at best, until the run's record shows
// the end its events already show: the record follows the terminal event
// (pkg/runs), and `agentmesh status` right after `agentmesh run` should
// agree with what run printed.
func awaitRecord(ctx context.Context, c *client.Client, tenant, runID string) {
	ctx, cancel := context.WithTimeout(ctx, recordWait)
	defer cancel()
	for {
		rec, err := c.Status(ctx, tenant, runID)
		if err == nil && rec.State.Terminal() || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// cancelOnInterrupt asks the mesh to cancel the run and reports whether
// it did (or the run had ended): whether its terminal status is coming.
func cancelOnInterrupt(ctx context.Context, c *client.Client, tenant, runID string, io *stdio) bool {
	fmt.Fprintf(io.stderr, "agentmesh: interrupted: cancelling run %s (Ctrl-C again to quit at once)\n", runID)
	ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
	defer cancel()
	reply, err := c.Cancel(ctx, tenant, runID)
	switch {
	case err != nil:
		fmt.Fprintf(io.stderr, "agentmesh: cancel %s: %v\n", runID, err)
		return false
	case reply.Ended:
		fmt.Fprintf(io.stderr, "agentmesh: run %s had already ended %s\n", runID, reply.State)
	}
	return true
}
