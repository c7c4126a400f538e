package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/adapter/cli"
	"github.com/agentmesh/agentmesh/pkg/adapter/cli/workspace"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// SecretEnv stands for the runner's own secrets (its NATS credentials,
// other profiles' keys): Setup sets it in the test process, and no child
// may ever see it.
const SecretEnv = "AGENTMESH_CONFORMANCE_RUNNER_SECRET"

// maxGrace bounds how long a stream may take to end a child that ignores
// SIGTERM: the suite's Grace plus generous slack, and still well below
// the 5 s default, so that it proves the configured grace is the one used.
const maxGrace = 4 * time.Second

// unicodeAnswer replaces the happy answer's end: two-, three- and
// four-byte UTF-8 sequences.
const unicodeAnswer = "is 42 — ünïcødé ✓ 🎉."

// exitClasses are the classes a non-zero exit may raise.
var exitClasses = []wire.Class{wire.ProviderProcessError, wire.ProviderQuotaError, wire.ProviderAuthError, wire.ProviderContextError}

// checkSubprocess checks every subprocess-safety property of docs/contract.md §9.6 through
// the subject's own adapter, with the fake CLI replaying the happy
// transcript with one variation each.
func checkSubprocess(t *testing.T, s Subject, c *corpus) {
	happy := s.stream(t, s.Happy)
	ref := c.get(t, s.Happy)
	if ref.err != nil || len(ref.chunks) < 2 {
		t.Fatalf("the happy stream %q must end cleanly with at least two chunks; got %d chunks, err %v", s.Happy, len(ref.chunks), ref.err)
	}
	// base is the happy run as captured, exiting 0.
	base := func(t *testing.T) Fake {
		f := happy.fake(t)
		f.Exit = 0
		return f
	}
	bg := context.Background()

	t.Run("argv_without_shell", func(t *testing.T) {
		t.Parallel()
		pwn := t.TempDir()
		prompt := fmt.Sprintf(`it's a "quoted"  prompt; $(touch %[1]s/a) ; touch %[1]s/b && echo $HOME | tee %[1]s/c `+"`touch %[1]s/d`"+` > %[1]s/e`, pwn)
		h := newHarness(t, s, ptr(base(t)))
		o := h.run(t, bg, h.callWith(t, s.Request(prompt), 1), nil)
		h.check(t, o, Ran)
		if o.err != nil {
			t.Errorf("err = %v", o.err)
		}
		r := h.seen(t)
		if r == nil {
			t.Fatal("the fake CLI never started")
		}
		n := 0
		for _, a := range r.Argv {
			switch {
			case a == prompt:
				n++
			case strings.Contains(a, "touch"):
				t.Errorf("argv element %q holds a piece of the prompt", a)
			}
		}
		if n != 1 {
			t.Errorf("the prompt is %d argv elements equal to it, want exactly 1: %q", n, r.Argv)
		}
		for _, dir := range []string{pwn, h.work} {
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Errorf("something ran the prompt: %s holds %v", dir, ents)
			}
		}
		if r.Cwd != h.work {
			t.Errorf("cwd = %q, want the run's workspace %q", r.Cwd, h.work)
		}
		if v, ok := os.LookupEnv(SecretEnv); ok {
			for k, cv := range r.Env {
				if k == SecretEnv || strings.Contains(cv, v) {
					t.Errorf("the runner's secret reached the child as %s", k)
				}
			}
		} else {
			t.Logf("%s is not set (no Setup in TestMain): the environment allow-list is not checked", SecretEnv)
		}
	})

	t.Run("workspace_rejected", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			ws   func(h *harness) string
		}{
			{"traversal", func(*harness) string { return "../outside" }},
			{"traversal_inside", func(*harness) string { return "work/../../outside" }},
			{"absolute", func(h *harness) string { return filepath.Join(filepath.Dir(h.root), "outside") }},
			{"absolute_inside_root", func(h *harness) string { return h.work }},
			{"symlink_escape", func(*harness) string { return "link" }},
			{"symlink_escape_below", func(*harness) string { return "work/deep/link" }},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, s, ptr(base(t)))
				outside := filepath.Join(filepath.Dir(h.root), "outside")
				for _, err := range []error{
					os.Mkdir(outside, 0o755),
					os.Symlink(outside, filepath.Join(h.root, "link")),
					os.Mkdir(filepath.Join(h.work, "deep"), 0o755),
					os.Symlink(outside, filepath.Join(h.work, "deep", "link")),
				} {
					if err != nil {
						t.Fatal(err)
					}
				}
				call := h.call(t, Stream{})
				call.Runtime = map[string]any{cli.RuntimeWorkspace: tt.ws(h)}
				o := h.run(t, bg, call, nil)
				h.check(t, o, Ran)
				if len(o.chunks) > 0 {
					t.Errorf("%d chunks from a refused workspace", len(o.chunks))
				}
				if !errors.Is(o.err, wire.AgenticRequestValidationError) || !errors.Is(o.err, workspace.ErrEscape) {
					t.Errorf("err = %v, want an AgenticRequestValidationError matching workspace.ErrEscape", o.err)
				}
				if h.seen(t) != nil {
					t.Errorf("the CLI started for workspace %q", tt.ws(h))
				}
			})
		}
	})

	t.Run("stdout_framing", func(t *testing.T) {
		// The happy transcript with multi-byte UTF-8 in its answer, so
		// that random writes also cut inside a character.
		raw := bytes.ReplaceAll(ref.raw, []byte("is 42."), []byte(unicodeAnswer))
		if !bytes.Contains(raw, []byte(unicodeAnswer)) {
			t.Logf("the happy transcript has no %q to replace; replaying it as is", "is 42.")
		}
		file := writeTemp(t, "stdout.ndjson", string(raw))
		plain := base(t)
		plain.Stdout = file
		h := newHarness(t, s, &plain)
		want := h.run(t, bg, h.call(t, Stream{}), nil)
		h.check(t, want, Ran)
		if want.err != nil {
			t.Fatalf("the answer in UTF-8, written line by line: err %v", want.err)
		}
		if bytes.Contains(raw, []byte(unicodeAnswer)) && !strings.Contains(ChunksJSON(want.chunks), unicodeAnswer[len("is 42 "):]) {
			t.Errorf("the UTF-8 answer did not come through intact:\n%s", ChunksJSON(want.chunks))
		}
		for _, mode := range []string{WriteSplit, WriteConcat} {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				f := plain
				f.Write = mode
				h := newHarness(t, s, &f)
				o := h.run(t, bg, h.call(t, Stream{}), nil)
				h.check(t, o, Ran)
				if o.err != nil || !sameChunks(o.chunks, want.chunks) {
					t.Errorf("stdout written %s: got err %v and\n%swant the chunks of the line-by-line run:\n%s",
						mode, o.err, ChunksJSON(o.chunks), ChunksJSON(want.chunks))
				}
			})
		}
	})

	t.Run("tail", func(t *testing.T) {
		for _, tt := range []struct {
			name, tail string
			repairable bool // an object cut off at EOF, which tail repair may complete
		}{
			{"broken_object", `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"cut o`, true},
			{"broken_array", `[{"type":"result","result":"cut o`, false},
			{"array", "[1,2,3]\n", false},
			{"scalar", "\"just a string\"\n", false},
			{"invalid_line", "{\"type\": nope}\n", false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				f := base(t)
				f.Tail = tt.tail
				h := newHarness(t, s, &f)
				o := h.run(t, bg, h.call(t, Stream{}), nil)
				h.check(t, o, Ran)
				if s.TailRepair && tt.repairable {
					// Repaired into an event, it is handled like any other:
					// a chunk or a typed error (Check), never a panic.
					if !isPrefix(o.chunks, ref.chunks) && !isPrefix(ref.chunks, o.chunks) {
						t.Errorf("the chunks before the repaired tail changed:\n%s", ChunksJSON(o.chunks))
					}
					t.Logf("repaired tail: %d chunks, err %v", len(o.chunks), o.err)
					return
				}
				if c := class(o.err); c != wire.ProviderProtocolError {
					t.Errorf("err = %v, want a ProviderProtocolError", o.err)
				}
				if !isPrefix(o.chunks, ref.chunks) {
					t.Errorf("the chunks before the bad tail are not those of the plain run:\n%s", ChunksJSON(o.chunks))
				}
			})
		}
	})

	t.Run("stderr_50MiB", func(t *testing.T) {
		t.Parallel()
		f := base(t)
		f.StderrBytes = 50 << 20
		h := newHarness(t, s, &f)
		start := time.Now()
		o := h.run(t, bg, h.call(t, Stream{}), nil)
		h.check(t, o, Ran)
		if o.err != nil || !sameChunks(o.chunks, ref.chunks) {
			t.Errorf("with 50 MiB of stderr: err %v and\n%swant the chunks of the plain run", o.err, ChunksJSON(o.chunks))
		}
		t.Logf("50 MiB of stderr drained in %v", time.Since(start))
	})

	t.Run("nonzero_exit", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			filler int64
		}{{"short_stderr", 0}, {"1MiB_stderr", 1 << 20}} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				f := base(t)
				f.Stderr = writeTemp(t, "stderr.txt", "fatal: the conformance fake gives up\n")
				f.StderrBytes = tt.filler
				f.Exit = 3
				h := newHarness(t, s, &f)
				o := h.run(t, bg, h.call(t, Stream{}), nil)
				h.check(t, o, Ran)
				var we *wire.Error
				if !errors.As(o.err, &we) || !slices.Contains(exitClasses, we.Class) {
					t.Fatalf("err = %v, want one of %v", o.err, exitClasses)
				}
				if we.ReturnCode == nil || *we.ReturnCode != 3 {
					t.Errorf("returncode = %v, want 3", deref(we.ReturnCode))
				}
				if n := len(we.StderrTail); n == 0 || n > wire.MaxErrorText {
					t.Errorf("stderr_tail is %d bytes, want 1 to %d", n, wire.MaxErrorText)
				}
				if len(we.Message) > wire.MaxErrorText {
					t.Errorf("message is %d bytes, want at most %d", len(we.Message), wire.MaxErrorText)
				}
				if tt.filler == 0 && !strings.Contains(we.StderrTail, "the conformance fake gives up") {
					t.Errorf("stderr_tail %q lacks the CLI's stderr", we.StderrTail)
				}
				if len(o.chunks) == 0 || !isPrefix(o.chunks, ref.chunks) {
					t.Errorf("the chunks before the exit must stay observable; got\n%s", ChunksJSON(o.chunks))
				}
			})
		}
	})

	t.Run("missing_binary", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, s, ptr(base(t)), func(c *cli.Config) {
			c.Binary = filepath.Join(t.TempDir(), "missing", "no-such-"+s.Name)
		})
		o := h.run(t, bg, h.call(t, Stream{}), nil)
		h.check(t, o, Ran)
		if len(o.chunks) > 0 {
			t.Errorf("%d chunks from a missing binary", len(o.chunks))
		}
		var we *wire.Error
		if !errors.As(o.err, &we) || we.Class != wire.ProviderExecutableNotFound {
			t.Fatalf("err = %v, want ProviderExecutableNotFound", o.err)
		}
		if !strings.Contains(we.Message, s.Config.InstallHint) {
			t.Errorf("message %q lacks the install hint %q", we.Message, s.Config.InstallHint)
		}
		if h.seen(t) != nil {
			t.Errorf("a process started")
		}
	})

	t.Run("reap", func(t *testing.T) {
		t.Run("normal_eof", func(t *testing.T) {
			t.Parallel()
			f := base(t)
			f.Grandchild = true
			h := newHarness(t, s, &f)
			o := h.run(t, bg, h.call(t, Stream{}), nil)
			h.check(t, o, Ran)
			if o.err != nil || !sameChunks(o.chunks, ref.chunks) {
				t.Errorf("err %v and\n%swant the chunks of the plain run", o.err, ChunksJSON(o.chunks))
			}
			h.reaped(t)
		})
		t.Run("parser_failure", func(t *testing.T) {
			t.Parallel()
			f := base(t)
			f.Tail, f.Hang, f.Grandchild = "[1,2,3]\n", true, true
			h := newHarness(t, s, &f)
			o := h.run(t, bg, h.call(t, Stream{}), nil)
			h.check(t, o, Ran)
			if class(o.err) != wire.ProviderProtocolError {
				t.Errorf("err = %v, want a ProviderProtocolError", o.err)
			}
			h.reaped(t)
		})
		// Deadline, cancel and early close: see the cancellation subtests.
		t.Run("sigkill_after_grace", func(t *testing.T) {
			t.Parallel()
			f := base(t)
			f.Hang, f.Grandchild, f.IgnoreTerm = true, true, true
			h := newHarness(t, s, &f)
			var broke time.Time
			o := h.run(t, bg, h.call(t, Stream{}), func(int, wire.Chunk) bool {
				broke = time.Now()
				return false
			})
			took := time.Since(broke)
			h.check(t, o, Closed)
			h.reaped(t)
			if took < Grace || took > maxGrace {
				t.Errorf("ending a child that ignores SIGTERM took %v, want the grace %v then SIGKILL (under %v)", took, Grace, maxGrace)
			}
		})
	})

	t.Run("primary_error_kept", func(t *testing.T) {
		t.Run("parser_failure_then_failing_exit", func(t *testing.T) {
			t.Parallel()
			f := base(t)
			f.Tail, f.Exit = "[1,2,3]\n", 3
			f.Stderr = writeTemp(t, "stderr.txt", "Error: 429 Too Many Requests: rate limit reached, quota exceeded\n")
			h := newHarness(t, s, &f)
			o := h.run(t, bg, h.call(t, Stream{}), nil)
			h.check(t, o, Ran)
			if class(o.err) != wire.ProviderProtocolError {
				t.Errorf("err = %v, want the parser failure (ProviderProtocolError), not the exit", o.err)
			}
		})
		t.Run("parser_failure_then_sigkill", func(t *testing.T) {
			t.Parallel()
			f := base(t)
			f.Tail, f.Hang, f.IgnoreTerm = "[1,2,3]\n", true, true
			h := newHarness(t, s, &f)
			start := time.Now()
			o := h.run(t, bg, h.call(t, Stream{}), nil)
			h.check(t, o, Ran)
			if class(o.err) != wire.ProviderProtocolError {
				t.Errorf("err = %v, want the parser failure (ProviderProtocolError), not the forced kill", o.err)
			}
			if took := time.Since(start); took < Grace {
				t.Errorf("the stream ended after %v, before the grace %v: was the child really forced?", took, Grace)
			}
			h.reaped(t)
		})
		t.Run("cancel_then_failing_exit", func(t *testing.T) {
			t.Parallel()
			f := base(t)
			f.Hang, f.TermExit = true, 7
			h := newHarness(t, s, &f)
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			o := h.run(t, ctx, h.call(t, Stream{}), func(i int, _ wire.Chunk) bool {
				if i == 0 {
					cancel()
				}
				return true
			})
			h.check(t, o, Cancelled) // the cancellation, not ProviderProcessError(7)
			if !isPrefix(o.chunks, ref.chunks) {
				t.Errorf("not a prefix of the plain run:\n%s", ChunksJSON(o.chunks))
			}
			h.reaped(t)
		})
		t.Run("deadline_then_failing_exit", func(t *testing.T) {
			t.Parallel()
			for d := time.Second; ; d *= 2 {
				f := base(t)
				f.Hang, f.TermExit = true, 7
				h := newHarness(t, s, &f)
				ctx, cancel := context.WithTimeout(bg, d)
				o := h.run(t, ctx, h.call(t, Stream{}), nil)
				cancel()
				if len(o.chunks) == 0 && d < 8*time.Second {
					t.Logf("no chunk within %v; retrying with a longer deadline", d)
					continue
				}
				h.check(t, o, TimedOut) // the deadline, not ProviderProcessError(7)
				h.reaped(t)
				return
			}
		})
	})
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
