package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// Grace is the SIGTERM grace the suite gives subprocess adapters
// (cli.Config.Grace), short so that escalation to SIGKILL is quick
// to prove.
const Grace = 300 * time.Millisecond

// Prompt is the prompt of every stream the suite runs, except where it
// tests the prompt itself.
const Prompt = "What is the answer?"

// runTimeout bounds every stream the suite runs, so that a hang is a
// failure (an unexpected deadline) rather than a stuck test binary.
const runTimeout = 30 * time.Second

// Subject is one registered adapter under test.
type Subject struct {
	// Name labels the subtests.
	Name string
	// New builds the adapter. A subprocess adapter must take cfg as its
	// operator configuration: the suite points it at the fake CLI. An
	// in-process adapter ignores cfg. New is called for every stream.
	New func(cfg cli.Config) (adapter.Adapter, error)
	// Config is a subprocess adapter's operator configuration (its
	// DefaultConfig); the suite overrides Binary, WorkspaceRoot and Grace
	// and adds the fake's variables to EnvSet. InstallHint must be set.
	Config cli.Config
	// Model is the pinned model of every call.
	Model string
	// Request returns a minimal valid request for prompt.
	Request func(prompt string) map[string]any
	// SessionID is a valid value of the resume field (resumable adapters).
	SessionID string
	// Streams are the subject's scripted streams: fixtures for an
	// in-process adapter, captured transcripts for a subprocess one.
	// Together they must prove every capability flag that is true.
	Streams []Stream
	// Happy names the stream of Streams that is a plain, successful
	// answer. A subprocess adapter's checks of docs/contract.md §9.6 replay its transcript with
	// variations.
	Happy string
	// Errors names the streams of Streams that end in a provider-declared
	// failure.
	Errors []string
	// ServerErrors names the streams of Streams in which the model API
	// answers with an HTTP 5xx server failure (a 500): each must fail
	// with exactly ProviderError, as the error chunk's class (a CLI) or as
	// the stream's retryable error (a remote adapter, which sees the
	// status before any output). A subprocess or remote adapter must name
	// at least one.
	ServerErrors []string
	// Slow is an in-process stream that runs long enough to be cancelled
	// after its first chunk. (A subprocess adapter's slow stream is Happy
	// with a fake that hangs after it.)
	Slow Stream
	// Reasoning is a phrase of provider reasoning found in some stream: it
	// must surface in thinking chunks and never outside them.
	Reasoning string
	// Scripted says a subprocess adapter's streams are scripted by their
	// requests (Stream.Request) against a program its Config already runs
	// (an ACP agent, which answers requests rather than printing a
	// transcript): the suite runs every check on them but the ones that
	// replay a captured transcript with variations (argv, environment,
	// grace, stdout framing: the subprocess transport those adapters
	// share, which the CLI adapters' suites prove).
	Scripted bool
	// TailRepair says the adapter may repair a truncated final value on
	// stdout into an event (Claude Code); then a broken tail need not be a
	// protocol error, only handled.
	TailRepair bool
}

// Stream is one scripted stream of a subject.
type Stream struct {
	Name string
	// Request is the request; nil is Subject.Request(Prompt).
	Request map[string]any
	// Attempt is the call's attempt (default 1).
	Attempt int
	// Transcript is, for a subprocess adapter, the path prefix of a
	// captured run: <Transcript>.stdout.ndjson is replayed on stdout,
	// <Transcript>.stderr.txt on stderr and <Transcript>.exit is the
	// exit status, as in testdata/cli/<cli>/.
	Transcript string
}

// Transcripts returns one Stream for each captured run in dir (each
// <name>.stdout.ndjson), sorted by name, with absolute paths.
func Transcripts(dir string) ([]Stream, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(abs, "*.stdout.ndjson"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no *.stdout.ndjson in " + dir)
	}
	var out []Stream
	for _, n := range names {
		base := strings.TrimSuffix(n, ".stdout.ndjson")
		out = append(out, Stream{Name: filepath.Base(base), Transcript: base})
	}
	return out, nil
}

// fake returns what the fake CLI does to replay st.
func (st Stream) fake(t *testing.T) Fake {
	t.Helper()
	return Replaying(t, st.Transcript)
}

// Run runs the whole suite over s as subtests of t: the stream rules on
// every stream it produces, the capability declaration and its proofs,
// provider-declared failures, session publication, cancellation and
// consumer close, and for a subprocess adapter every subprocess-safety
// property of docs/contract.md §9.6. Leaf subtests run in parallel. It blocks until all have
// finished.
func Run(t *testing.T, s Subject) {
	t.Helper()
	caps := checkDeclaration(t, s)
	if t.Failed() {
		return
	}
	c := &corpus{s: s, caps: caps, out: map[string]*entry{}}
	t.Run("streams", func(t *testing.T) {
		for _, st := range s.Streams {
			t.Run(st.Name, func(t *testing.T) {
				t.Parallel()
				c.get(t, st.Name)
			})
		}
	})
	t.Run("capabilities", func(t *testing.T) { checkProofs(t, caps, c) })
	t.Run("provider_errors", func(t *testing.T) { checkProviderErrors(t, s, c) })
	t.Run("server_errors", func(t *testing.T) { checkServerErrors(t, s, caps, c) })
	t.Run("reasoning", func(t *testing.T) { checkReasoning(t, s, caps, c) })
	t.Run("sessions", func(t *testing.T) { checkSessions(t, s, caps, c) })
	t.Run("cancellation", func(t *testing.T) { checkCancellation(t, s, caps, c) })
	if caps.Transport == wire.TransportSubprocess && !s.Scripted {
		t.Run("subprocess", func(t *testing.T) { checkSubprocess(t, s, c) })
	}
}

// checkDeclaration checks the capability declaration and the request type
// it promises, and returns the declaration.
func checkDeclaration(t *testing.T, s Subject) wire.Capabilities {
	t.Helper()
	// Built outside the subtest, which -run may skip: every later check
	// depends on the declaration.
	a := newAdapter(t, s, s.Config)
	caps := a.Capabilities()
	t.Run("declaration", func(t *testing.T) {
		if err := adapter.CheckCapabilities(a.Name(), caps); err != nil {
			t.Errorf("CheckCapabilities: %v", err)
		}
		// The check the registry applies must refuse this declaration's
		// contradictory neighbours, or it would pass anything.
		for _, bad := range contradictions(caps) {
			if err := adapter.CheckCapabilities(a.Name(), bad); !errors.Is(err, wire.ProfileError) {
				t.Errorf("CheckCapabilities(%+v) = %v, want a ProfileError", bad, err)
			}
		}
		if again := a.Capabilities(); again != caps {
			t.Errorf("Capabilities changed between calls: %+v, then %+v", caps, again)
		}
		if caps.Resumable != (caps.ResumeField != "") {
			t.Errorf("resumable=%t but resume_field=%q", caps.Resumable, caps.ResumeField)
		}
		if !subjectToken.MatchString(a.Name()) {
			t.Errorf("Name %q is not a subject token", a.Name())
		}
		if _, err := a.Validate(Encode(t, s.Request(Prompt))); err != nil {
			t.Fatalf("the minimal request does not validate: %v", err)
		}
		// Strict requests: an unknown field is a validation error.
		withUnknown := s.Request(Prompt)
		withUnknown["conformance_unknown_field"] = "x"
		if _, err := a.Validate(Encode(t, withUnknown)); !errors.Is(err, wire.AgenticRequestValidationError) {
			t.Errorf("Validate with an unknown field: err = %v, want AgenticRequestValidationError", err)
		}
		if caps.Resumable {
			// The resume field must exist on the request type: a valid
			// session id in it is not an unknown field.
			req := s.Request(Prompt)
			req[caps.ResumeField] = s.SessionID
			if _, err := a.Validate(Encode(t, req)); err != nil {
				t.Errorf("Validate with resume_field %q = %q: %v", caps.ResumeField, s.SessionID, err)
			}
		} else {
			// A false flag: there is no resume input to fill.
			req := s.Request(Prompt)
			req["resume"] = "0d9c7f5e-2f55-4f3c-9a71-5a1c2b3d4e5f"
			if _, err := a.Validate(Encode(t, req)); !errors.Is(err, wire.AgenticRequestValidationError) {
				t.Errorf("a non-resumable adapter accepted a request field \"resume\": err = %v", err)
			}
		}
		if caps.Transport == wire.TransportSubprocess {
			if !slices.Contains(a.RuntimeKeys(), cli.RuntimeWorkspace) {
				t.Errorf("RuntimeKeys %q lack %q", a.RuntimeKeys(), cli.RuntimeWorkspace)
			}
			if s.Config.InstallHint == "" {
				t.Errorf("Config.InstallHint is empty")
			}
			if s.Happy == "" {
				t.Errorf("Subject.Happy is empty")
			}
		}
	})
	return caps
}

// contradictions returns declarations that differ from caps in one way
// that makes them invalid: no transport, an unknown one, and resumable
// disagreeing with resume_field.
func contradictions(caps wire.Capabilities) []wire.Capabilities {
	none, unknown, flipped := caps, caps, caps
	none.Transport, unknown.Transport = "", "conformance-unknown"
	flipped.Resumable = !caps.Resumable
	return []wire.Capabilities{none, unknown, flipped}
}

var subjectToken = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// outcome is one stream as the suite observed it.
type outcome struct {
	chunks []wire.Chunk
	err    error
	raw    []byte // what the fake CLI replayed on stdout
}

// corpus runs each of a subject's streams once, on first use (normally in
// the streams subtests, or on demand when -run selects only later ones),
// and keeps the outcomes. It is safe for concurrent use.
type corpus struct {
	s    Subject
	caps wire.Capabilities
	mu   sync.Mutex
	out  map[string]*entry
}

type entry struct {
	once sync.Once
	o    outcome
}

// get returns the outcome of the stream named name, running it first if
// no one has.
func (c *corpus) get(t *testing.T, name string) outcome {
	t.Helper()
	st := c.s.stream(t, name)
	c.mu.Lock()
	e := c.out[name]
	if e == nil {
		e = &entry{}
		c.out[name] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.o = runStream(t, c.s, c.caps, st) })
	return e.o
}

// all returns the outcome of every stream of the subject, by name.
func (c *corpus) all(t *testing.T) map[string]outcome {
	t.Helper()
	out := make(map[string]outcome, len(c.s.Streams))
	for _, st := range c.s.Streams {
		out[st.Name] = c.get(t, st.Name)
	}
	return out
}

// runStream runs one scripted stream to its end and checks the stream
// rules on it.
func runStream(t *testing.T, s Subject, caps wire.Capabilities, st Stream) outcome {
	t.Helper()
	var h *harness
	var raw []byte
	if caps.Transport == wire.TransportSubprocess && !s.Scripted {
		if st.Transcript == "" {
			t.Fatalf("stream %q of a subprocess adapter has no Transcript", st.Name)
		}
		f := st.fake(t)
		var err error
		if raw, err = os.ReadFile(f.Stdout); err != nil {
			t.Fatal(err)
		}
		h = newHarness(t, s, &f)
	} else {
		h = newHarness(t, s, nil)
	}
	o := h.run(t, context.Background(), h.call(t, st), nil)
	o.raw = raw
	h.check(t, o, Ran)
	return o
}

// harness is one adapter instance, wired (for a subprocess adapter) to
// one configuration of the fake CLI, with its own workspace root.
type harness struct {
	s      Subject
	a      adapter.Adapter
	caps   wire.Capabilities
	root   string // the workspace root, symlinks resolved
	work   string // root/work, the run's workspace
	record string // where the fake writes its record
	fake   *Fake
}

// newHarness builds the subject's adapter; with fake set, its binary is
// this test binary acting as that fake.
func newHarness(t *testing.T, s Subject, fake *Fake, edit ...func(*cli.Config)) *harness {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{s: s, root: filepath.Join(base, "root"), record: filepath.Join(base, "record.json")}
	h.work = filepath.Join(h.root, "work")
	if err := os.MkdirAll(h.work, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := cloneConfig(s.Config)
	if fake != nil {
		f := *fake
		f.Record = h.record
		h.fake = &f
		cfg, _ = f.Play(t, cfg)
	}
	if fake != nil || s.Scripted {
		cfg.WorkspaceRoot = h.root
		cfg.Grace = Grace
	}
	for _, e := range edit {
		e(&cfg)
	}
	h.a = newAdapter(t, s, cfg)
	h.caps = h.a.Capabilities()
	return h
}

func newAdapter(t *testing.T, s Subject, cfg cli.Config) adapter.Adapter {
	t.Helper()
	a, err := s.New(cfg)
	if err != nil {
		t.Fatalf("new %s adapter: %v", s.Name, err)
	}
	return a
}

func cloneConfig(c cli.Config) cli.Config {
	c.EnvAllow = slices.Clone(c.EnvAllow)
	c.EnvSet = maps.Clone(c.EnvSet)
	if c.EnvSet == nil {
		c.EnvSet = map[string]string{}
	}
	return c
}

var executable = func() func(t testing.TB) string {
	exe, err := os.Executable()
	return func(t testing.TB) string {
		t.Helper()
		if err != nil {
			t.Fatalf("the test binary (the fake CLI): %v", err)
		}
		return exe
	}
}()

// Encode returns the msgpack request of fields, as a caller sends it. It
// fails t if fields do not encode.
func Encode(t testing.TB, fields map[string]any) []byte {
	t.Helper()
	b, err := wire.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// call validates st's request, as the router does, and returns the call.
func (h *harness) call(t *testing.T, st Stream) adapter.Call {
	t.Helper()
	fields := st.Request
	if fields == nil {
		fields = h.s.Request(Prompt)
	}
	return h.callWith(t, fields, st.Attempt)
}

func (h *harness) callWith(t *testing.T, fields map[string]any, attempt int) adapter.Call {
	t.Helper()
	req, err := h.a.Validate(Encode(t, fields))
	if err != nil {
		t.Fatalf("validate %v: %v", fields, err)
	}
	var runtime map[string]any
	if slices.Contains(h.a.RuntimeKeys(), cli.RuntimeWorkspace) {
		runtime = map[string]any{cli.RuntimeWorkspace: "work"}
	}
	return adapter.Call{RunID: "conformance-1", Request: req, Runtime: runtime,
		Attempt: max(attempt, 1), Model: h.s.Model, MaxAttempts: 3}
}

// run ranges over one stream. after is called with each chunk's index and
// the chunk; returning false breaks out of the loop. The stream is bounded
// by runTimeout on top of ctx. Items after the error, and an error yielded
// with a non-zero chunk, are reported as failures.
func (h *harness) run(t *testing.T, ctx context.Context, call adapter.Call, after func(i int, c wire.Chunk) bool) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	var o outcome
	ended := false
	for c, err := range h.a.Stream(ctx, call) {
		if ended {
			t.Errorf("the stream yielded (%s chunk, %v) after its error %v; the error must be the last value", c.Type, err, o.err)
		}
		if err != nil {
			if !reflect.DeepEqual(c, wire.Chunk{}) {
				t.Errorf("the error %v came with a non-zero chunk %+v", err, c)
			}
			o.err, ended = err, true
			continue
		}
		o.chunks = append(o.chunks, c)
		if after != nil && !after(len(o.chunks)-1, c) {
			break
		}
	}
	return o
}

// check reports every stream-rule violation of o.
func (h *harness) check(t *testing.T, o outcome, end Ending) {
	t.Helper()
	for _, p := range Check(h.caps, o.chunks, o.err, end) {
		t.Errorf("stream rule: %s", p)
	}
	if t.Failed() {
		t.Logf("chunks:\n%s\nerr: %v", ChunksJSON(o.chunks), o.err)
	}
}

// seen returns the fake's record, or nil if the fake never started.
func (h *harness) seen(t *testing.T) *Record {
	t.Helper()
	return ReadRecord(t, h.record)
}

// reaped checks that the fake, and its grandchild if it had one, are gone.
func (h *harness) reaped(t *testing.T) {
	t.Helper()
	r := h.seen(t)
	if r == nil {
		t.Fatal("the fake CLI never started (no record)")
	}
	if s := survivor(r.Pid); s != "" {
		t.Errorf("the CLI process survived the stream: %s", s)
	}
	if h.fake.Grandchild {
		if r.Grandchild == 0 {
			t.Fatal("the fake recorded no grandchild")
		}
		if s := survivor(r.Grandchild); s != "" {
			t.Errorf("the grandchild in the CLI's process group survived the stream: %s", s)
		}
	}
}

// isPrefix reports whether got is a prefix of want, comparing chunks by
// their JSON.
func isPrefix(got, want []wire.Chunk) bool {
	if len(got) > len(want) {
		return false
	}
	for i := range got {
		a, _ := json.Marshal(got[i])
		b, _ := json.Marshal(want[i])
		if string(a) != string(b) {
			return false
		}
	}
	return true
}

func sameChunks(got, want []wire.Chunk) bool {
	return len(got) == len(want) && isPrefix(got, want)
}

// class returns err's wire class, or "".
func class(err error) wire.Class {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Class
	}
	return ""
}

// RunCLI runs the suite (Run) over the CLI adapter newAdapter builds, cfg
// its operator configuration (its DefaultConfig), the fake CLI replaying
// its captured runs (testdata/cli/<name>). Those follow the scenarios
// every CLI's captures share: S1 a plain answer with the reasoning "I
// recall it is 42", and S3, S4 and S5 the provider's 401, 429 and 500 (a
// server error), each with the CLI's own retries and without them
// (-noretry). s gives Model, SessionID and TailRepair; RunCLI fills in the
// rest.
func RunCLI[R any](t *testing.T, newAdapter func(cli.Config) (*cli.Adapter[R], error), cfg cli.Config, s Subject) {
	t.Helper()
	a, err := newAdapter(cfg)
	if err != nil {
		t.Fatalf("new adapter: %v", err)
	}
	s.Name = a.Name()
	s.New = func(cfg cli.Config) (adapter.Adapter, error) { return newAdapter(cfg) }
	s.Config = cfg
	if s.Streams, err = Transcripts(Testdata(t, "cli", s.Name)); err != nil {
		t.Fatal(err)
	}
	s.Request = func(p string) map[string]any { return map[string]any{"prompt": p} }
	s.Happy = "S1"
	s.Errors = []string{"S3", "S4", "S5", "S3-noretry", "S4-noretry", "S5-noretry"}
	s.ServerErrors = []string{"S5", "S5-noretry"}
	s.Reasoning = "I recall it is 42"
	Run(t, s)
}
