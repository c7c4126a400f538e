package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/ndjson"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// The contract's numbers (docs/contract.md §4.8, §9.4).
const (
	DefaultStderrLimit  = 256 << 10
	DefaultDrainTimeout = 2 * time.Second
	DefaultGrace        = 5 * time.Second
)

// Spec describes one child process.
type Spec struct {
	// Binary is the executable's name or path, found on PATH.
	Binary string
	// InstallHint tells the operator how to install Binary; it is the
	// message of ProviderExecutableNotFound.
	InstallHint string
	// Args are the arguments after the binary, each its own argv element.
	Args []string
	// Dir is the working directory (already contained by the caller).
	Dir string
	// Env is the complete child environment as KEY=VALUE; build it with
	// AllowEnv. Nil gives the child an empty environment, never the runner's.
	Env []string
	// Stdin is the child's standard input. Nil means /dev/null; an adapter
	// opts in to anything else explicitly. A reader that is not an *os.File
	// is copied to the child by os/exec, and Stream does not return before
	// that copy ends, so it must reach EOF (or fail) on its own: a reader
	// that blocks forever blocks Stream, even past ctx.
	Stdin io.Reader
	// TailRepair may turn an incomplete final value on stdout into a map.
	// Without it, or if it returns false, the tail is a ProviderProtocolError.
	TailRepair func(tail []byte) (map[string]any, bool)
	// Classify maps a non-zero exit to an error class; nil uses Classify.
	Classify func(code int, stderr string) wire.Class
	// StderrLimit, DrainTimeout and Grace default to the record's values.
	StderrLimit  int
	DrainTimeout time.Duration
	Grace        time.Duration
	// OnStart, if set, is called with the child's pid once it has started.
	OnStart func(pid int)
	// StderrLine, if set, is called with each line (without its line end)
	// of the first StderrLimit bytes of stderr, in order, on the goroutine
	// that drains stderr; a last line without a newline is passed when
	// stderr ends or reaches the limit. Every call returns before Stream
	// does. It must not block: stderr is not drained meanwhile.
	StderrLine func(line string)
	// StateDir, if set, is the host-local directory where the child's
	// process group is recorded while it lives, so that the next runner
	// on the host can end it should this process die (see Reap). A record
	// that cannot be written fails the start: the child is killed and the
	// error is a ProviderTransportError. Empty records nothing.
	StateDir string
	// Confine, if set, confines the child (a sandbox, pkg/sandbox): it
	// rewrites the command before it starts and is told the pid once it
	// has. A confinement that cannot be set up fails the start with a
	// ProviderTransportError naming why; nothing runs unconfined.
	Confine Confiner
}

// A Confiner confines one child process.
type Confiner interface {
	// Confine rewrites cmd, not yet started, to run confined. cmd.Path is
	// the resolved binary, cmd.Dir its working directory and cmd.Env its
	// complete environment.
	Confine(cmd *exec.Cmd) (Confinement, error)
}

// A Confinement is one confined child's set-up.
type Confinement interface {
	// Started is called with the pid once the child has started, before
	// anything reads its output. An error kills the child and fails the
	// start.
	Started(pid int) error
	// Release is called once the child and its group are gone.
	Release()
}

func (s *Spec) setDefaults() {
	if s.StderrLimit <= 0 {
		s.StderrLimit = DefaultStderrLimit
	}
	if s.DrainTimeout <= 0 {
		s.DrainTimeout = DefaultDrainTimeout
	}
	if s.Grace <= 0 {
		s.Grace = DefaultGrace
	}
	if s.Classify == nil {
		s.Classify = Classify
	}
}

// Stream starts the child and yields every JSON map it writes to stdout, in
// order. The last value yielded may carry an error: ProviderExecutableNotFound
// (before any process starts), ProviderProtocolError (a value that is not a
// map, malformed JSON, an object over ndjson.MaxValueBytes, or an unrepaired
// incomplete tail), ProviderProcessError or a quota/auth/context subclass (a
// non-zero exit, after every map already written), or ctx's cause if ctx
// ended. On every path, including the consumer breaking out of the loop or
// panicking in it, the process group is sent SIGTERM, given Grace to exit,
// then SIGKILL, and the child is reaped before Stream returns; when the
// child exits on its own, whatever is left of its group is ended the same
// way. A cleanup failure never replaces an error already in flight. Each
// range over the result starts its own child; it blocks while the child
// runs.
func Stream(ctx context.Context, spec Spec) iter.Seq2[map[string]any, error] {
	return func(yield func(map[string]any, error) bool) {
		run(ctx, spec, false, func(b []byte, m map[string]any, _ bool) (bool, error) {
			if m == nil {
				var err error
				if m, err = ndjson.DecodeObject(b); err != nil {
					return false, err
				}
			}
			return yield(m, nil), nil
		}, func(err error) { yield(nil, err) })
	}
}

// StreamRaw is Stream without the decoding: it yields the bytes of each
// value on stdout that starts a JSON object (ndjson.Decoder.NextBytes),
// valid only until the loop body returns, and leaves it to the consumer to
// decode them (with an ndjson.Lexer, or ndjson.DecodeObject). A map that
// TailRepair made is yielded encoded as JSON. Its errors, teardown and
// blocking are Stream's, except that a syntax error or a number out of
// range inside an object is the consumer's to find: such an object is
// yielded like any other. A consumer that finds one reports it as Stream
// would, a ProviderProtocolError naming the binary's stdout
// (ProtocolError), after breaking out of the loop so that the child is
// torn down first.
func StreamRaw(ctx context.Context, spec Spec) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		run(ctx, spec, false, func(b []byte, m map[string]any, _ bool) (bool, error) {
			if m != nil {
				var err error
				if b, err = json.Marshal(m); err != nil {
					return false, fmt.Errorf("encode the repaired tail: %w", err)
				}
			}
			return yield(b, nil), nil
		}, func(err error) { yield(nil, err) })
	}
}

// A Line is what StreamLines yields: one object on the child's stdout, or
// a guess at one.
type Line struct {
	// Bytes is the object as StreamRaw frames it or, with Guess, the line
	// from an object's '{' through its newline, unframed
	// (ndjson.Decoder.NextLine). It is valid until the loop body returns.
	Bytes []byte
	// Guess reports that Bytes is a line the consumer must read as one
	// JSON object followed by whitespace only, or Refuse.
	Guess   bool
	refused bool
}

// Refuse, called on a guess, says it is not one JSON object followed by
// whitespace only. The consumer must not have acted on it; the next value
// StreamLines yields is the object the line starts with, framed.
func (l *Line) Refuse() { l.refused = l.Guess }

// StreamLines is StreamRaw for a consumer that reads every object exactly
// or not at all (with an ndjson.Lexer), and so can spare the framing of
// lines it reads: each line on stdout that starts an object is yielded as
// a guess, and only one the consumer refuses is framed, then yielded
// again as StreamRaw would yield it. Its errors, teardown and blocking are
// StreamRaw's. The *Line is reused from one value to the next.
func StreamLines(ctx context.Context, spec Spec) iter.Seq2[*Line, error] {
	return func(yield func(*Line, error) bool) {
		var l Line
		run(ctx, spec, true, func(b []byte, m map[string]any, guess bool) (bool, error) {
			if m != nil {
				var err error
				if b, err = json.Marshal(m); err != nil {
					return false, fmt.Errorf("encode the repaired tail: %w", err)
				}
			}
			l = Line{Bytes: b, Guess: guess}
			more := yield(&l, nil)
			if l.refused {
				return more, errRefused
			}
			return more, nil
		}, func(err error) { yield(nil, err) })
	}
}

// ProtocolError is the error Stream ends with when the child's stdout
// holds err (a framing or decoding error): a ProviderProtocolError naming
// binary's stdout.
func ProtocolError(binary string, err error) *wire.Error {
	return wire.Errorf(wire.ProviderProtocolError, "%s stdout: %v", binary, err)
}

// A framer gets each object read from stdout (or, with m set, the
// repaired tail) and reports whether to go on. With guess set (only when
// run was asked for lines) b is an unframed line (ndjson.Decoder.NextLine);
// errRefused sends the framed object after it.
type framer func(b []byte, m map[string]any, guess bool) (bool, error)

// run is Stream's body: frame gets each object, as lines when lines is
// set; fail gets the final error, if any.
func run(ctx context.Context, spec Spec, lines bool, frame framer, fail func(error)) {
	spec.setDefaults() // each range over the Seq has its own copy to fill in
	path, err := exec.LookPath(spec.Binary)
	if err != nil {
		fail(notFound(spec, err))
		return
	}
	if ctx.Err() != nil { // as exec.Cmd.Start: no process for a context already ended
		fail(context.Cause(ctx))
		return
	}
	c, err := start(spec, path)
	if err != nil {
		fail(err)
		return
	}
	stopWatch := context.AfterFunc(ctx, func() { c.terminate() })
	// The consumer's loop body runs inside frame (and an adapter's
	// TailRepair inside read). If it panics, or calls runtime.Goexit as
	// t.Fatal does, read never returns: the group is still torn down and
	// reaped on the way out.
	finished := false
	defer func() {
		if !finished {
			_ = c.finish(ctx, errStop)
			stopWatch()
		}
	}()
	primary := c.read(ctx, lines, frame)
	err = c.finish(ctx, primary)
	finished = true
	stopWatch()
	if err != nil {
		fail(err)
	}
}

func notFound(spec Spec, err error) *wire.Error {
	hint := spec.InstallHint
	if hint == "" {
		hint = "install it and make sure it is on PATH"
	}
	return wire.Errorf(wire.ProviderExecutableNotFound, "%s not found (%v): %s", spec.Binary, err, hint)
}

// child is one started process and its pipes.
type child struct {
	spec   Spec
	cmd    *exec.Cmd
	pgid   int
	stdout *os.File
	stderr *os.File
	drain  chan struct{} // closed when stderr is drained
	tail   bytes.Buffer  // the first StderrLimit bytes of stderr
	last   lastBytes     // the last wire.MaxErrorText bytes, once stderr outgrew tail

	done    chan struct{} // closed when the leader is reaped and the rest of its group ended
	waitErr error         // cmd.Wait's result, set before done closes

	termOnce sync.Once
	termDone chan struct{} // closed when terminate has finished
	termed   bool          // we signalled the group (under termOnce)
}

func start(spec Spec, path string) (*child, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, wire.Errorf(wire.ProviderTransportError, "stdout pipe: %v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, wire.Errorf(wire.ProviderTransportError, "stderr pipe: %v", err)
	}
	cmd := &exec.Cmd{Path: path, Args: append([]string{spec.Binary}, spec.Args...), Dir: spec.Dir, Env: spec.Env,
		Stdin: spec.Stdin, Stdout: outW, Stderr: errW, SysProcAttr: sysProcAttr()}
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	var conf Confinement
	if spec.Confine != nil {
		var err error
		if conf, err = spec.Confine.Confine(cmd); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, wire.Errorf(wire.ProviderTransportError, "start %s: confine it: %v", spec.Binary, err)
		}
	}
	// The one owner of the child: it forks, then waits, on one OS thread
	// (see sysProcAttr: the parent-death signal follows the forking
	// thread). Our pipes are plain files, so Wait closes none of the ends
	// we read, and reaping the leader at once lets terminate see the moment
	// the group is gone. Once the leader has exited, what is left of its
	// group (grandchildren) is ended too: one that inherited stdout would
	// otherwise keep read from ever seeing EOF. Then the group's record
	// goes, unless some member outlived even the SIGKILL.
	started := make(chan *child, 1)
	failed := make(chan error, 1)
	release := func() {
		if conf != nil {
			conf.Release()
		}
	}
	go func() {
		runtime.LockOSThread()
		err := cmd.Start()
		if err != nil {
			runtime.UnlockOSThread()
			release()
			failed <- err
			return
		}
		c := &child{spec: spec, cmd: cmd, pgid: cmd.Process.Pid, stdout: outR, stderr: errR,
			drain: make(chan struct{}), termDone: make(chan struct{}), done: make(chan struct{})}
		if conf != nil {
			if err := conf.Started(c.pgid); err != nil {
				_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
				_ = cmd.Wait()
				runtime.UnlockOSThread()
				release()
				failed <- wire.Errorf(wire.ProviderTransportError, "start %s: confine it: %v", spec.Binary, err)
				return
			}
		}
		var rec string
		if spec.StateDir != "" {
			if rec, err = record(spec.StateDir, c.pgid, spec.Binary); err != nil {
				// Fail closed: a child nobody could reap after our death is
				// not started at all.
				_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
				_ = cmd.Wait()
				runtime.UnlockOSThread()
				release()
				failed <- wire.Errorf(wire.ProviderTransportError, "start %s: record its process group in %s: %v", spec.Binary, spec.StateDir, err)
				return
			}
		}
		started <- c
		c.waitErr = cmd.Wait()
		runtime.UnlockOSThread()
		c.terminate()
		if rec != "" && !groupAlive(c.pgid) {
			_ = os.Remove(rec)
		}
		release()
		close(c.done)
	}()
	var c *child
	select {
	case c = <-started:
	case err = <-failed:
	}
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		var we *wire.Error
		if errors.As(err, &we) {
			return nil, we
		}
		// A missing working directory fails the same way (ENOENT from
		// chdir in the child) but is not a missing binary.
		if spec.Dir != "" {
			if _, serr := os.Stat(spec.Dir); serr != nil {
				return nil, wire.Errorf(wire.ProviderTransportError, "start %s: working directory: %v", spec.Binary, serr)
			}
		}
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return nil, notFound(spec, err)
		}
		return nil, wire.Errorf(wire.ProviderTransportError, "start %s: %v", spec.Binary, err)
	}
	if spec.OnStart != nil {
		spec.OnStart(c.pgid)
	}
	go c.drainStderr()
	return c, nil
}

// drainStderr keeps the first StderrLimit bytes (what Classify reads) and
// the last few KiB (the error's stderr tail), and discards the rest, so a
// chatty child can never block on a full pipe.
func (c *child) drainStderr() {
	defer close(c.drain)
	var head io.Writer = &c.tail
	var lines *lineWriter
	if c.spec.StderrLine != nil {
		lines = &lineWriter{fn: c.spec.StderrLine}
		head = io.MultiWriter(&c.tail, lines)
	}
	_, _ = io.Copy(head, io.LimitReader(c.stderr, int64(c.spec.StderrLimit)))
	if lines != nil {
		lines.flush()
	}
	_, _ = io.Copy(&c.last, c.stderr)
}

// lineWriter passes each complete line written to it to fn; flush passes
// what is left. It buffers at most one line, and the head it is fed is
// bounded by StderrLimit.
type lineWriter struct {
	fn  func(string)
	buf []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			return n, nil
		}
		w.buf = append(w.buf, p[:i]...)
		w.fn(string(bytes.TrimSuffix(w.buf, []byte("\r"))))
		w.buf = w.buf[:0]
		p = p[i+1:]
	}
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.fn(string(bytes.TrimSuffix(w.buf, []byte("\r"))))
		w.buf = nil
	}
}

// lastBytes keeps the last wire.MaxErrorText bytes written to it.
type lastBytes struct {
	buf   []byte
	wrote bool
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.wrote = true
	if len(p) >= wire.MaxErrorText {
		l.buf = append(l.buf[:0], p[len(p)-wire.MaxErrorText:]...)
		return len(p), nil
	}
	if over := len(l.buf) + len(p) - wire.MaxErrorText; over > 0 {
		l.buf = append(l.buf[:0], l.buf[over:]...)
	}
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// stderrTail is the end of what the child wrote to stderr.
func (c *child) stderrTail() string {
	if !c.last.wrote {
		return c.tail.String()
	}
	return "[…] " + string(c.last.buf)
}

// read frames stdout and hands each object to frame, lines unframed
// where the consumer reads them (StreamLines) when lines is set. It
// returns the error that stops the stream, or nil at a clean EOF; errStop
// means the consumer stopped.
func (c *child) read(ctx context.Context, lines bool, frame framer) error {
	dec := ndjson.NewDecoder(c.stdout)
	refused := false
	for {
		var b []byte
		var guess bool
		var err error
		switch {
		case refused:
			b, err = dec.Reframe()
			refused = false
		case lines:
			b, guess, err = dec.NextLine()
		default:
			b, err = dec.NextBytes()
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if errors.Is(err, ndjson.ErrIncomplete) && c.spec.TailRepair != nil {
				if fixed, ok := c.spec.TailRepair(dec.Tail()); ok && fixed != nil {
					more, err := frame(nil, fixed, false)
					if err != nil {
						return ProtocolError(c.spec.Binary, err)
					}
					if !more {
						return errStop
					}
					return nil
				}
			}
			return ProtocolError(c.spec.Binary, err)
		}
		more, err := frame(b, nil, guess)
		if err == errRefused {
			refused, err = true, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return ProtocolError(c.spec.Binary, err)
		}
		if !more {
			return errStop
		}
	}
}

// errRefused is a framer's answer to a guess its consumer refused.
var errRefused = errors.New("guess refused")

var errStop = errors.New("consumer stopped")

// MaxTeardown is the longest a Stream takes to return once its context
// ended, for a spec with the given grace (0: DefaultGrace): SIGTERM, the
// grace, SIGKILL, the wait for the group to vanish, and the stderr drain.
func MaxTeardown(grace time.Duration) time.Duration {
	if grace <= 0 {
		grace = DefaultGrace
	}
	return grace + killWait + DefaultDrainTimeout
}

// killWait bounds how long terminate waits for the group to vanish after
// SIGKILL (a process in uninterruptible sleep dies only when it wakes).
const killWait = 2 * time.Second

// terminate sends SIGTERM to the group, waits up to Grace for every member
// to exit, then sends SIGKILL and waits up to killWait for the group to be
// gone. It is idempotent and safe to call from the context watcher while
// finish runs.
func (c *child) terminate() {
	c.termOnce.Do(func() {
		defer close(c.termDone)
		c.termed = true
		if !groupAlive(c.pgid) {
			return
		}
		_ = syscall.Kill(-c.pgid, syscall.SIGTERM)
		deadline := time.Now().Add(c.spec.Grace)
		for time.Now().Before(deadline) {
			if !groupAlive(c.pgid) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
		// Delivery is not instant: without this wait a grandchild may still
		// be running when Stream returns.
		for deadline := time.Now().Add(killWait); groupAlive(c.pgid) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	})
	<-c.termDone
}

// groupAlive reports whether any process of the group can still run. A
// zombie cannot, but kill(2) still finds it: our own leader until the Wait
// goroutine reaps it, and an orphaned grandchild for good under an init
// that does not reap (a container's, or a minimal VM's). Where /proc can
// be read, a group whose members are all zombies is therefore gone;
// elsewhere every member counts.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	live, ok := liveMember(pgid)
	return live || !ok
}

// liveMember scans /proc for a member of process group pgid that is not a
// zombie; ok is false if /proc cannot be read.
func liveMember(pgid int) (live, ok bool) {
	ok = forEachStat(func(st stat) bool {
		live = st.pgrp == pgid && !st.dead()
		return !live
	})
	return live, ok
}

// finish tears the group down, reaps the child and turns its exit into the
// stream's final error, which is primary unless primary is nil.
func (c *child) finish(ctx context.Context, primary error) error {
	if primary != nil {
		c.terminate() // parser failure or early close: stop the child first
	}
	// The leader is reaped, and whatever else of its group was left
	// (grandchildren) has been ended, politely then by force.
	<-c.done
	werr := c.waitErr
	c.stdout.Close()
	select {
	case <-c.drain:
	case <-time.After(c.spec.DrainTimeout):
		c.stderr.Close() // a survivor outside the group holds stderr open
		<-c.drain
	}
	c.stderr.Close()
	if primary != nil {
		if primary == errStop {
			return nil
		}
		return primary
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var exitErr *exec.ExitError
	if errors.As(werr, &exitErr) {
		code := exitErr.ExitCode()
		stderr := c.tail.String()
		if code < 0 { // killed by a signal we did not send
			if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
		we := wire.Errorf(c.spec.Classify(code, stderr), "%s exited with status %d", c.spec.Binary, code)
		we.ReturnCode = &code
		we.StderrTail = c.stderrTail()
		we.Bound()
		return we
	}
	if werr != nil {
		return wire.Errorf(wire.ProviderTransportError, "wait for %s: %v", c.spec.Binary, werr)
	}
	return nil
}

// Classify is the default classification of a non-zero exit by its stderr:
// quota, auth and context-length failures get their classes, anything else
// is a ProviderProcessError.
func Classify(_ int, stderr string) wire.Class {
	s := bytes.ToLower([]byte(stderr))
	switch {
	case containsAny(s, "rate limit", "rate_limit", "quota", "429", "too many requests", "resource_exhausted", "overloaded"):
		return wire.ProviderQuotaError
	case containsAny(s, "unauthorized", "authentication", "invalid api key", "api key not valid", "401", "403", "permission denied", "forbidden"):
		return wire.ProviderAuthError
	case containsAny(s, "context length", "context window", "context_length", "too many tokens", "maximum context", "prompt is too long"):
		return wire.ProviderContextError
	}
	return wire.ProviderProcessError
}

func containsAny(s []byte, subs ...string) bool {
	for _, sub := range subs {
		if bytes.Contains(s, []byte(sub)) {
			return true
		}
	}
	return false
}
