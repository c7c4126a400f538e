package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// checkProofs checks that every true capability flag is proven by some
// stream of the subject and that no false one is synthesized by any.
func checkProofs(t *testing.T, caps wire.Capabilities, c *corpus) {
	all := c.all(t)
	if len(all) == 0 {
		t.Fatal("no stream ran")
	}
	var toolPair, usage, systemSession, observed string
	for _, name := range slices.Sorted(maps.Keys(all)) {
		o := all[name]
		uses := map[string]bool{}
		for _, ch := range o.chunks {
			switch {
			case ch.Type == wire.ChunkToolUse && ch.ToolID != "":
				uses[ch.ToolID] = true
				if caps.Transport == wire.TransportRemote && toolPair == "" {
					toolPair = name // the caller answers a remote tool call in the next run
				}
			case ch.Type == wire.ChunkToolResult && uses[ch.ToolID] && toolPair == "":
				toolPair = name
			case ch.Type == wire.ChunkResult && ch.Metadata.Usage != nil && usage == "":
				usage = name
			case ch.Type == wire.ChunkSystem && ch.Metadata.SessionID != "" && systemSession == "":
				systemSession = name
			}
			if ch.Metadata.ProviderSessionID != "" && observed == "" {
				observed = name
			}
			// A false flag is never synthesized (Check flags tool and usage
			// output; sessions are checked here across the corpus).
			if !caps.Resumable && ch.Metadata.SessionID != "" {
				t.Errorf("resumable=false but stream %q published session_id %q", name, ch.Metadata.SessionID)
			}
			if caps.Resumable && ch.Metadata.ProviderSessionID != "" {
				t.Errorf("resumable=true but stream %q published provider_session_id %q", name, ch.Metadata.ProviderSessionID)
			}
			if !caps.EmitsToolEvents && (ch.Type == wire.ChunkToolUse || ch.Type == wire.ChunkToolResult) {
				t.Errorf("emits_tool_events=false but stream %q yielded a %s chunk", name, ch.Type)
			}
			if !caps.ReportsUsage && ch.Metadata.Usage != nil {
				t.Errorf("reports_usage=false but stream %q reported usage", name)
			}
		}
	}
	if caps.EmitsToolEvents && toolPair == "" {
		t.Errorf("emits_tool_events=true, but no stream yields a tool_use and a tool_result with the same tool_id")
	}
	if caps.ReportsUsage && usage == "" {
		t.Errorf("reports_usage=true, but no stream's result chunk carries metadata.usage")
	}
	if caps.Resumable && systemSession == "" {
		t.Errorf("resumable=true, but no stream's system chunk carries metadata.session_id")
	}
	t.Logf("proofs: tool events by %q, usage by %q, session by %q; an observed provider_session_id in %q",
		toolPair, usage, systemSession, observed)
}

// checkProviderErrors checks each provider-declared failure: exactly one
// error chunk, last, with a known ProviderError class.
func checkProviderErrors(t *testing.T, s Subject, c *corpus) {
	if len(s.Errors) == 0 {
		t.Fatal("the subject names no provider-error stream")
	}
	for _, name := range s.Errors {
		t.Run(name, func(t *testing.T) {
			o := c.get(t, name)
			var errs []wire.Chunk
			for _, ch := range o.chunks {
				if ch.Type == wire.ChunkError {
					errs = append(errs, ch)
				}
			}
			if len(errs) != 1 {
				t.Fatalf("%d error chunks, want exactly 1\n%s", len(errs), ChunksJSON(o.chunks))
			}
			last := o.chunks[len(o.chunks)-1]
			if last.Type != wire.ChunkError {
				t.Errorf("the error chunk is not the last chunk (last: %s)", last.Type)
			}
			ec := errs[0].Metadata.ErrorClass
			if !ec.Known() || !ec.IsA(wire.ProviderError) {
				t.Errorf("metadata.error_class = %q, want a ProviderError class", ec)
			}
			if !errs[0].IsError {
				t.Errorf("the error chunk has is_error=false")
			}
			if o.err != nil {
				t.Errorf("the stream went on after its error chunk with the error %v", o.err)
			}
			t.Logf("error chunk: class %s, %q", ec, errs[0].Content)
		})
	}
}

// checkServerErrors checks that a model API's HTTP 5xx fails with exactly
// ProviderError, the one class every adapter gives it (docs/contract-notes.md, "Error
// classes"): not a subclass, not ProviderStreamError (an error chunk
// without a class). As the stream's error it is retryable from a remote
// adapter (the status comes before any output, docs/contract.md §4.5) and
// never from a CLI (which has made its own retries).
func checkServerErrors(t *testing.T, s Subject, caps wire.Capabilities, c *corpus) {
	if len(s.ServerErrors) == 0 {
		if caps.Transport == wire.TransportSubprocess || caps.Transport == wire.TransportRemote {
			t.Fatal("the subject names no server-error stream; an adapter with a model API behind it must")
		}
		t.Skip("no model API behind this adapter")
	}
	for _, name := range s.ServerErrors {
		t.Run(name, func(t *testing.T) {
			o := c.get(t, name)
			var class wire.Class
			var from string
			for _, ch := range o.chunks {
				if ch.Type == wire.ChunkError {
					class, from = ch.Metadata.ErrorClass, "the error chunk"
				}
			}
			switch {
			case from != "" && o.err != nil:
				t.Fatalf("both an error chunk (%s) and the error %v", class, o.err)
			case from == "" && o.err == nil:
				t.Fatalf("neither an error chunk nor an error\n%s", ChunksJSON(o.chunks))
			case from == "":
				we := wire.AsError(o.err)
				class, from = we.Class, "the stream's error"
				if want := caps.Transport == wire.TransportRemote; we.Retryable != want {
					t.Errorf("the stream's error %v has retryable %t, want %t", we, we.Retryable, want)
				}
			}
			if class != wire.ProviderError {
				t.Errorf("%s has class %q, want exactly %s", from, class, wire.ProviderError)
			}
		})
	}
}

// checkReasoning checks that the subject's reasoning phrase surfaces in
// thinking chunks and never outside them.
func checkReasoning(t *testing.T, s Subject, caps wire.Capabilities, c *corpus) {
	if s.Reasoning == "" {
		t.Skip("the subject names no reasoning phrase")
	}
	inRaw, inThinking := false, false
	for name, o := range c.all(t) {
		if bytes.Contains(o.raw, []byte(s.Reasoning)) {
			inRaw = true
		}
		var thinking strings.Builder
		for i, ch := range o.chunks {
			if ch.Type == wire.ChunkThinking {
				thinking.WriteString(ch.Content)
				continue
			}
			if strings.Contains(ch.Content, s.Reasoning) || strings.Contains(string(mustJSON(ch.ToolOutput)), s.Reasoning) {
				t.Errorf("stream %q: chunk %d (%s) carries the reasoning %q", name, i+1, ch.Type, s.Reasoning)
			}
		}
		if strings.Contains(thinking.String(), s.Reasoning) {
			inThinking = true
		}
	}
	if (inRaw || caps.Transport != wire.TransportSubprocess || s.Scripted) && !inThinking {
		t.Errorf("no stream surfaces the reasoning %q as thinking", s.Reasoning)
	}
}

func mustJSON(v any) []byte {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// checkSessions checks session publication: the canonical id on a system
// chunk as soon as it is confirmed, a published id that the resume field
// takes back, an id never invented, and no id from an invalid event.
func checkSessions(t *testing.T, s Subject, caps wire.Capabilities, c *corpus) {
	all := c.all(t)
	t.Run("published_on_system", func(t *testing.T) {
		if !caps.Resumable {
			t.Skip("not resumable")
		}
		for name, o := range all {
			for i, ch := range o.chunks {
				if ch.Metadata.SessionID == "" {
					continue
				}
				if ch.Type != wire.ChunkSystem {
					t.Errorf("stream %q: the first chunk that carries session_id %q is chunk %d, a %s chunk; the id is published on a system chunk first",
						name, ch.Metadata.SessionID, i+1, ch.Type)
				}
				break
			}
		}
	})
	t.Run("round_trip", func(t *testing.T) {
		if !caps.Resumable {
			t.Skip("not resumable")
		}
		a := newAdapter(t, s, s.Config)
		for name, o := range all {
			for _, ch := range o.chunks {
				id := ch.Metadata.SessionID
				if id == "" {
					continue
				}
				req := s.Request(Prompt)
				req[caps.ResumeField] = id
				if _, err := a.Validate(Encode(t, req)); err != nil {
					t.Errorf("stream %q published session_id %q, which the resume field %q refuses: %v", name, id, caps.ResumeField, err)
				}
			}
		}
	})
	if caps.Transport != wire.TransportSubprocess || s.Scripted {
		return
	}
	t.Run("never_invented", func(t *testing.T) {
		for name, o := range all {
			for _, ch := range o.chunks {
				for _, id := range []string{ch.Metadata.SessionID, ch.Metadata.ProviderSessionID} {
					if id != "" && !bytes.Contains(o.raw, []byte(id)) {
						t.Errorf("stream %q published session id %q, which the CLI never printed", name, id)
					}
				}
			}
		}
	})
	t.Run("invalid_event", func(t *testing.T) { checkInvalidSessionEvents(t, s, caps, c.get(t, s.Happy)) })
	t.Run("resume_reaches_cli", func(t *testing.T) {
		if !caps.Resumable {
			t.Skip("not resumable")
		}
		t.Parallel()
		st := s.stream(t, s.Happy)
		h := newHarness(t, s, ptr(st.fake(t)))
		req := s.Request(Prompt)
		req[caps.ResumeField] = s.SessionID
		o := h.run(t, context.Background(), h.callWith(t, req, 1), nil)
		h.check(t, o, Ran)
		r := h.seen(t)
		if r == nil {
			t.Fatal("the fake CLI never started")
		}
		if !slices.Contains(r.Argv, s.SessionID) {
			t.Errorf("resume_field %q = %q did not reach the CLI as an argv element: %q", caps.ResumeField, s.SessionID, r.Argv)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// stream returns the subject's stream named name.
func (s Subject) stream(t *testing.T, name string) Stream {
	t.Helper()
	for _, st := range s.Streams {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("the subject has no stream %q", name)
	return Stream{}
}

// checkInvalidSessionEvents replays the happy transcript with the event
// that carries the session id made invalid in several ways; the id must
// never be published from it.
func checkInvalidSessionEvents(t *testing.T, s Subject, caps wire.Capabilities, happy outcome) {
	var id string
	for _, ch := range happy.chunks {
		if id = ch.Metadata.SessionID + ch.Metadata.ProviderSessionID; id != "" {
			break
		}
	}
	if id == "" {
		t.Skip("the happy transcript publishes no session id")
	}
	lines := bytes.SplitAfter(happy.raw, []byte("\n"))
	at := slices.IndexFunc(lines, func(l []byte) bool { return bytes.Contains(l, []byte(`"`+id+`"`)) })
	if at < 0 {
		t.Fatalf("no line of the happy transcript holds %q as a JSON string", id)
	}
	line := lines[at]
	cut := bytes.Index(line, []byte(id)) + len(id)/2
	rest := bytes.Join(lines[at+1:], nil)
	before := bytes.Join(lines[:at], nil)
	const notAnID = "../not a session id"
	tests := []struct {
		name   string
		stdout []byte
		// forbidden ids: none of them may be published
		forbidden []string
		// noID: no session id of any kind may be published
		noID bool
	}{
		{name: "cut_inside_the_id_at_eof", stdout: concat(before, line[:cut]), noID: true},
		{name: "cut_inside_the_id_mid_stream", stdout: concat(before, line[:cut], []byte("\n"), rest), noID: true},
		{name: "id_not_a_string", stdout: concat(before, bytes.Replace(line, []byte(`"`+id+`"`), []byte(`12345`), 1), rest),
			forbidden: []string{"12345"}},
		{name: "id_malformed", stdout: bytes.ReplaceAll(happy.raw, []byte(id), []byte(notAnID)),
			forbidden: []string{notAnID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "stdout.ndjson")
			if err := os.WriteFile(file, tt.stdout, 0o644); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, s, &Fake{Stdout: file})
			o := h.run(t, context.Background(), h.call(t, Stream{}), nil)
			h.check(t, o, Ran)
			for i, ch := range o.chunks {
				got := []string{ch.Metadata.SessionID, ch.Metadata.ProviderSessionID}
				for _, g := range got {
					if g == "" {
						continue
					}
					if tt.noID || slices.Contains(tt.forbidden, g) {
						t.Errorf("chunk %d (%s) published the session id %q, seen only in an invalid event", i+1, ch.Type, g)
					}
				}
			}
			t.Logf("%d chunks, err: %v", len(o.chunks), o.err)
		})
	}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// checkCancellation cancels, times out and closes a running stream after
// its first chunk: what was yielded is a prefix of the uninterrupted
// stream (no synthetic chunk), the error is the cancellation or the
// deadline, and a subprocess adapter's whole process group is gone when
// the stream returns.
func checkCancellation(t *testing.T, s Subject, caps wire.Capabilities, c *corpus) {
	sub := caps.Transport == wire.TransportSubprocess && !s.Scripted
	var ref outcome
	var long func(t *testing.T) (*harness, Stream)
	// deadline is the first deadline tried: long enough for a subprocess
	// to start and print, short enough for an in-process stream to be
	// still running.
	deadline := time.Second
	if sub {
		ref = c.get(t, s.Happy)
		st := s.stream(t, s.Happy)
		long = func(t *testing.T) (*harness, Stream) {
			f := st.fake(t)
			f.Exit, f.Hang, f.Grandchild = 0, true, true
			return newHarness(t, s, &f), st
		}
	} else {
		if s.Slow.Name == "" {
			t.Fatal("an in-process subject needs a Slow stream")
		}
		h := newHarness(t, s, nil)
		start := time.Now()
		ref = h.run(t, context.Background(), h.call(t, s.Slow), nil)
		deadline = time.Since(start) / 2
		h.check(t, ref, Ran)
		long = func(t *testing.T) (*harness, Stream) { return newHarness(t, s, nil), s.Slow }
	}
	if len(ref.chunks) < 2 {
		t.Fatalf("the slow stream has %d chunks; cancelling after the first needs more", len(ref.chunks))
	}
	after := func(t *testing.T, h *harness, o outcome, end Ending) {
		t.Helper()
		h.check(t, o, end)
		if !isPrefix(o.chunks, ref.chunks) {
			t.Errorf("the %s stream is not a prefix of the uninterrupted one (a synthetic chunk?)\ngot:\n%swant a prefix of:\n%s",
				end, ChunksJSON(o.chunks), ChunksJSON(ref.chunks))
		}
		if sub {
			h.reaped(t)
		}
	}
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		h, st := long(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		o := h.run(t, ctx, h.call(t, st), func(i int, _ wire.Chunk) bool {
			if i == 0 {
				cancel()
			}
			return true
		})
		after(t, h, o, Cancelled)
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		// The deadline must pass after the first chunk and before the
		// end. How long a stream takes varies with the machine's load, so
		// the deadline is searched for: doubled while no chunk came
		// before it (a subprocess slow to start), halved while an
		// in-process stream finished before it. Each try is a whole run
		// that must still pass every check; only the timing is searched.
		d := deadline
		for try := 1; ; try++ {
			h, st := long(t)
			ctx, cancel := context.WithTimeout(context.Background(), d)
			o := h.run(t, ctx, h.call(t, st), nil)
			cancel()
			switch {
			case try < 8 && len(o.chunks) == 0:
				t.Logf("try %d: no chunk within %v; trying a longer deadline", try, d)
				d *= 2
				continue
			case try < 8 && o.err == nil && !sub:
				h.check(t, o, Ran)
				t.Logf("try %d: the stream ended within %v; trying a shorter deadline", try, d)
				d /= 2
				continue
			}
			after(t, h, o, TimedOut)
			return
		}
	})
	t.Run("close", func(t *testing.T) {
		t.Parallel()
		h, st := long(t)
		o := h.run(t, context.Background(), h.call(t, st), func(int, wire.Chunk) bool { return false })
		if len(o.chunks) != 1 {
			t.Errorf("%d chunks after breaking at the first", len(o.chunks))
		}
		after(t, h, o, Closed)
	})
}
