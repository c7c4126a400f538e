package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// decodeCLI runs agentmesh decode with args on stdin in.
func decodeCLI(in []byte, args ...string) (code int, stdout, stderr string) {
	io, out, errOut := testIO(nil)
	io.stdin = bytes.NewReader(in)
	code = run(context.Background(), append([]string{"decode"}, args...), io)
	return code, out.String(), errOut.String()
}

// TestDecodeGoldens: every message type, sniffed, named by --type and by
// its Content-Type, gives the golden JSON of testdata/decode.
func TestDecodeGoldens(t *testing.T) {
	bins, err := filepath.Glob("../../testdata/decode/*.bin")
	if err != nil || len(bins) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	types := map[wire.MessageType]bool{}
	for _, bin := range bins {
		name := strings.TrimSuffix(filepath.Base(bin), ".bin")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(bin, ".bin") + ".json")
			if err != nil {
				t.Fatal(err)
			}
			mt, err := wire.Sniff(in)
			if err != nil || !strings.HasPrefix(name, string(mt)) {
				t.Fatalf("Sniff = %q, %v", mt, err)
			}
			types[mt] = true
			for _, args := range [][]string{{"--indent"}, {"--indent", "--type", string(mt)}, {"--type", mt.ContentType().String(), "--indent"}} {
				code, out, errOut := decodeCLI(in, args...)
				if code != exitOK || out != string(want) {
					t.Errorf("decode %v: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", args, code, errOut, out, want)
				}
			}
			code, out, _ := decodeCLI(in)
			if code != exitOK || strings.Count(out, "\n") != 1 || !json.Valid([]byte(out)) {
				t.Errorf("decode without --indent: exit %d, want one line of JSON: %q", code, out)
			}
		})
	}
	if len(types) != len(wire.MessageTypes()) {
		t.Errorf("goldens cover %d message types, there are %d", len(types), len(wire.MessageTypes()))
	}
}

func TestDecodeRefuses(t *testing.T) {
	event, err := os.ReadFile("../../testdata/decode/event-status.bin")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		in       []byte
		args     []string
		wantCode int
		want     string // in stdout when it succeeds, stderr when not
	}{
		{"empty", nil, nil, exitFail, "empty body"},
		{"text without --type", []byte("acme.run-1"), nil, exitFail, "not an agentmesh message"},
		{"truncated", event[:len(event)-4], nil, exitFail, "malformed"},
		{"trailing newline", append(slices.Clone(event), '\n'), nil, exitFail, "trailing bytes"},
		{"another type", event, []string{"--type", "lease"}, exitFail, "lease: malformed"},
		{"map of no type", []byte{0x81, 0xa3, 'z', 'z', 'z', 0x01}, nil, exitFail, "unknown message type"},
		{"unknown --type", event, []string{"--type", "ledger"}, exitUsage, "unknown message type"},
		{"argument", event, []string{"event"}, exitUsage, "read from stdin"},
		{"too large", bytes.Repeat([]byte{0xc0}, wire.MaxMessageSize+1), nil, exitFail, "too large"},
		{"text", []byte("acme.run-1"), []string{"--type", "text"}, exitOK, `"acme.run-1"`},
		{"not text", []byte{0xff, 0xfe}, []string{"--type", "text"}, exitFail, "not UTF-8"},
		{"json passes", []byte(`{"swept": 1, "failed": 0}`), nil, exitOK, `{"swept":1,"failed":0}`},
		{"sweeper's count", []byte("3"), nil, exitOK, "3\n"},
		{"session id by its subject", []byte("sess-1"), []string{"--subject", "$KV.agentmesh_sessions.acme.c1"}, exitOK, `"sess-1"`},
		{"run key by its subject", []byte("acme.run-1"), []string{"--subject", "agentmesh.runner.r-1.cancel"}, exitOK, `"acme.run-1"`},
		{"event by a prefixed subject", event, []string{"--subject", "stage.agentmesh.events.acme.run-1", "--prefix", "stage"}, exitOK, `"kind":"status"`},
		{"natscli --raw: no subject", event, []string{"--subject", ""}, exitOK, `"kind":"status"`},
		{"subject of another type", event, []string{"--subject", "agentmesh.submit.acme"}, exitFail, "run-request: malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := decodeCLI(tt.in, tt.args...)
			got := out
			if tt.wantCode != exitOK {
				got = errOut
			}
			if code != tt.wantCode || !strings.Contains(got, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d with %q", code, out, errOut, tt.wantCode, tt.want)
			}
		})
	}
}

func TestTypeOfSubject(t *testing.T) {
	n := subject.Names{}
	for s, want := range map[string]string{
		"agentmesh.events.acme.run-1":                "event",
		"agentmesh.submit.acme":                      "run-request",
		"agentmesh.work.subprocess.claude-code.acme": "work",
		"agentmesh.runner.r-1.cancel":                "text",
		"$KV.agentmesh_consent.acme.alice":           "consent",
		"$KV.agentmesh_exports.acme.run-1":           "export-record",
		"$KV.agentmesh_checkpoints.acme.c1":          "checkpoint",
		"$KV.agentmesh_redaction.acme":               "redaction-rules",
		"$KV.agentmesh_sessions.acme.c1":             "text",
		"$KV.other.acme.run-1":                       "",
		"agentmesh.events.acme":                      "",
		"_INBOX_acme.x.y":                            "",
	} {
		if got := typeOfSubject(n, s); got != want {
			t.Errorf("typeOfSubject(%q) = %q, want %q", s, got, want)
		}
	}
}

// outLines splits output into its lines, each with its newline.
func outLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	return lines[:len(lines)-1]
}

// runSlow starts agentmesh run of the slow fixture script with args in
// the background and waits until its output shows until; done gives its
// exit code.
func (m *testMesh) runSlow(ctx context.Context, t *testing.T, until string, args ...string) (out, errOut *servicetest.Buffer, done <-chan int) {
	t.Helper()
	io, out, errOut := testIO(nil)
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append([]string{"run", "--server", m.url, "-p", "fixture", "--script", "slow"}, args...), io)
	}()
	natstest.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(out.String(), until) {
			return fmt.Errorf("no %q yet:\n%s", until, out)
		}
		return nil
	})
	return out, errOut, code
}

// capture records every message the server routes.
type capture struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func (c *capture) add(m *nats.Msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
}

func (c *capture) all() []*nats.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs)
}

// translate runs filter on msg the way natscli's --translate does
// (cli/util.go, filterDataThroughCmd): the filter is a Go template with
// the functions Subject and Stream, split into words and run without a
// shell, the body on stdin, once per message; the output is stdout and
// stderr combined. The word agentmesh runs this test binary as the
// agentmesh command.
func translate(t *testing.T, filter string, msg *nats.Msg) (string, error) {
	t.Helper()
	tmpl, err := template.New("translate").Funcs(template.FuncMap{
		"Subject": func() string { return msg.Subject },
		"Stream":  func() string { return "" },
	}).Parse(filter)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, nil); err != nil {
		t.Fatal(err)
	}
	parts := strings.Fields(b.String())
	if parts[0] == "agentmesh" {
		parts[0] = os.Args[0]
	}
	cmd := exec.Command(parts[0], parts[1:]...)
	// The race detector sleeps 1 s at exit unless told not to.
	cmd.Env = append(os.Environ(), asMainEnv+"=1", "GORACE=atexit_sleep_ms=0")
	cmd.Stdin = bytes.NewReader(msg.Data)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestUpInspect runs the inspection commands against agentmesh up: every
// message published carries its Content-Type and decodes as natscli's
// --translate would run decode; follow --from resumes at exactly that
// seq; runs ls lists and filters the records.
func TestUpInspect(t *testing.T) {
	m := startUp(t, false)
	ctx := context.Background()
	nc, err := nats.Connect(m.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var all, events capture
	for subj, c := range map[string]*capture{">": &all, "agentmesh.events.>": &events} {
		sub, err := nc.Subscribe(subj, c.add)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// The runs: one succeeded (default tenant), one failed (acme), one
	// cancelled while running (default), followed live from seq 3.
	var full []string // run ok's events, as NDJSON lines
	t.Run("runs", func(t *testing.T) {
		code, out, errOut := m.cli(ctx, "run", "-p", "fixture", "--json", "--run-id", "ok", "--label", "team=infra", "hi")
		if code != exitOK {
			t.Fatalf("run: exit %d, stderr %q", code, errOut)
		}
		full = outLines(out)
		if code, _, errOut := m.cli(ctx, "run", "--tenant", "acme", "-p", "fixture", "--script", "provider-error", "--run-id", "bad", "hi"); code != exitFail {
			t.Fatalf("failing run: exit %d, stderr %q", code, errOut)
		}
	})

	t.Run("follow --from", func(t *testing.T) {
		if len(full) < 6 {
			t.Fatalf("run ok has %d events", len(full))
		}
		for from := 1; from <= len(full); from++ {
			code, out, errOut := m.cli(ctx, "follow", "ok", "--json", "--from", fmt.Sprint(from))
			if want := strings.Join(full[from-1:], ""); code != exitOK || out != want {
				t.Errorf("follow --from %d: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", from, code, errOut, out, want)
			}
		}
		code, out, _ := m.cli(ctx, "follow", "ok", "--from", "3")
		if code != exitOK || !strings.HasPrefix(out, "[running attempt 1]\n") || strings.Contains(out, "[accepted") || !strings.Contains(out, "[succeeded") {
			t.Errorf("follow --from 3 (text): exit %d, stdout:\n%s", code, out)
		}
		for _, tt := range []struct {
			args     []string
			wantCode int
			want     string
		}{
			{[]string{"ok", "--from", fmt.Sprint(len(full) + 1)}, exitFail, fmt.Sprintf("ended succeeded at seq %d: there is no seq %d", len(full), len(full)+1)},
			{[]string{"never-submitted"}, exitFail, "not found"},
			{[]string{"ok", "--from", "0"}, exitUsage, "at least 1"},
			{[]string{"a.b"}, exitUsage, "invalid token"},
			{[]string{"bad"}, exitFail, "not found"}, // in tenant acme, not default
		} {
			code, _, errOut := m.cli(ctx, append([]string{"follow"}, tt.args...)...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.want) {
				t.Errorf("follow %v: exit %d, stderr %q; want %d with %q", tt.args, code, errOut, tt.wantCode, tt.want)
			}
		}
		if code, _, errOut := m.cli(ctx, "follow", "--tenant", "acme", "bad"); code != exitFail || errOut != "" {
			t.Errorf("follow of a failed run: exit %d, stderr %q; want 1 and nothing on stderr", code, errOut)
		}
	})

	t.Run("follow a live run from seq 3, list it running, cancel it", func(t *testing.T) {
		// A minute before its first chunk: it runs until it is cancelled.
		out, errOut, done := m.runSlow(ctx, t, `"state":"running"`, "--delay-ms", "60000", "--run-id", "slow", "--json", "hi")
		code, lsOut, lsErr := m.cli(ctx, "runs", "ls", "--state", "running", "--json")
		if code != exitOK || !strings.Contains(lsOut, `"run_id":"slow"`) || !strings.Contains(lsOut, `"state":"running"`) {
			t.Errorf("runs ls --state running: exit %d, stderr %q, stdout:\n%s", code, lsErr, lsOut)
		}
		fio, fout, ferr := testIO(nil)
		followed := make(chan int, 1)
		go func() {
			followed <- run(ctx, []string{"follow", "--server", m.url, "slow", "--json", "--from", "3"}, fio)
		}()
		natstest.Eventually(t, 20*time.Second, func() error {
			if !strings.Contains(fout.String(), `"seq":3,`) {
				return fmt.Errorf("follow has not printed seq 3 yet: %q", fout)
			}
			return nil
		})
		if code, cout, cerr := m.cli(ctx, "cancel", "slow"); code != exitOK {
			t.Errorf("cancel: exit %d, %q %q", code, cout, cerr)
		}
		if code := <-done; code != exitFail {
			t.Fatalf("run: exit %d, stderr %q", code, errOut)
		}
		if code := <-followed; code != exitFail {
			t.Errorf("follow of a cancelled run: exit %d, stderr %q; want 1", code, ferr)
		}
		lines := outLines(out.String())
		if want := strings.Join(lines[2:], ""); fout.String() != want || !strings.Contains(want, `"state":"cancelled"`) {
			t.Errorf("follow --from 3 of the live run:\n%s\nwant the run's own events from seq 3 to its cancel:\n%s", fout, want)
		}
		var first wire.Event
		if err := json.Unmarshal([]byte(lines[2]), &first); err != nil || first.Seq != 3 {
			t.Errorf("follow's first event = %+v, %v; want seq 3", first, err)
		}
		if _, err := nc.Request(subject.Names{}.SweeperReconcile(), nil, 10*time.Second); err != nil {
			t.Errorf("reconcile: %v", err)
		}
	})

	t.Run("runs ls", func(t *testing.T) {
		ls := func(args ...string) (ids []string) {
			t.Helper()
			code, out, errOut := m.cli(ctx, append([]string{"runs", "ls", "--json"}, args...)...)
			if code != exitOK {
				t.Fatalf("runs ls %v: exit %d, stderr %q", args, code, errOut)
			}
			for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
				if line == "" {
					continue
				}
				var rec wire.RunRecord
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("runs ls %v: %v: %s", args, err, line)
				}
				ids = append(ids, rec.Tenant+"/"+rec.RunID+"/"+string(rec.State))
			}
			return ids
		}
		for _, tt := range []struct {
			args []string
			want []string
		}{
			{nil, []string{"default/ok/succeeded", "default/slow/cancelled"}},
			{[]string{"--all"}, []string{"default/ok/succeeded", "acme/bad/failed", "default/slow/cancelled"}},
			{[]string{"--tenant", "acme"}, []string{"acme/bad/failed"}},
			{[]string{"--all", "--state", "failed,cancelled"}, []string{"acme/bad/failed", "default/slow/cancelled"}},
			{[]string{"--state", "failed"}, nil},
			{[]string{"--all", "--since", "1h"}, []string{"default/ok/succeeded", "acme/bad/failed", "default/slow/cancelled"}},
			{[]string{"--all", "--since", "2999-01-01"}, nil},
			{[]string{"--all", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, nil},
		} {
			if got := ls(tt.args...); !slices.Equal(got, tt.want) {
				t.Errorf("runs ls %v = %v, want %v", tt.args, got, tt.want)
			}
		}
		code, out, _ := m.cli(ctx, "runs", "ls", "--all")
		if code != exitOK || !strings.HasPrefix(out, "TENANT") || !strings.Contains(out, "ProviderQuotaError") || strings.Count(out, "\n") != 4 {
			t.Errorf("runs ls table: exit %d:\n%s", code, out)
		}
		for _, args := range [][]string{{"--state", "done"}, {"--since", "yesterday"}, {"--since", "-1h"}, {"extra"}} {
			if code, _, errOut := m.cli(ctx, append([]string{"runs", "ls"}, args...)...); code != exitUsage || errOut == "" {
				t.Errorf("runs ls %v: exit %d, stderr %q; want 2 naming the problem", args, code, errOut)
			}
		}
		// The record of run ok carries its label, and decodes as nats kv get --raw gives it.
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := js.KeyValue(ctx, subject.Names{}.RunsBucket())
		if err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(ctx, subject.RunKey("default", "ok"))
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut := decodeCLI(e.Value())
		if code != exitOK || !strings.Contains(out, `"run_id":"ok"`) || !strings.Contains(out, `"state":"succeeded"`) {
			t.Errorf("decode of the run record: exit %d, stderr %q, stdout %s", code, errOut, out)
		}
	})

	t.Run("Content-Type on every message", func(t *testing.T) {
		msgs := all.all()
		checkContentTypes(t, msgs)
		labelled := 0
		for _, msg := range msgs {
			if msg.Subject == (subject.Names{}).Submit("default") {
				req, err := wire.Decode[wire.RunRequest](msg.Data)
				if err == nil && req.RunID == "ok" {
					labelled++
					if !maps.Equal(req.Labels, map[string]string{"team": "infra"}) {
						t.Errorf("run ok's labels = %v, want team=infra", req.Labels)
					}
				}
			}
		}
		if labelled == 0 { // its publish, and its delivery to the router
			t.Error("no submission of run ok seen")
		}
	})

	t.Run("nats sub --translate", func(t *testing.T) {
		msgs := events.all()
		if len(msgs) < 10 {
			t.Fatalf("%d event messages seen", len(msgs))
		}
		for _, msg := range msgs {
			want, err := wire.JSON(wire.TypeEvent, msg.Data)
			if err != nil {
				t.Fatalf("%s: %v", msg.Subject, err)
			}
			for _, filter := range []string{"agentmesh decode", "agentmesh decode --subject {{Subject}}"} {
				out, err := translate(t, filter, msg)
				if err != nil || out != string(want)+"\n" {
					t.Errorf("--translate %q of %s: %v, output %q; want %s", filter, msg.Subject, err, out, want)
				}
			}
		}
		out, err := translate(t, "agentmesh decode", &nats.Msg{Subject: "agentmesh.events.acme.x", Data: []byte("not msgpack")})
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitFail || !strings.HasPrefix(out, "agentmesh: decode: not an agentmesh message") {
			t.Errorf("--translate of a bad body: %v, output %q; want exit 1 naming the problem", err, out)
		}
	})
}

// checkContentTypes: every message agentmesh published with a body
// carries the Content-Type of what it is, and replies to the mesh's
// requests too.
func checkContentTypes(t *testing.T, msgs []*nats.Msg) {
	t.Helper()
	n := subject.Names{}
	want := map[string]string{} // subject → Content-Type its messages must carry
	kinds := map[string]int{}
	for _, m := range msgs {
		var ct, kind string
		switch {
		case matchSubject(n.EventsAll(), m.Subject):
			ct, kind = wire.TypeEvent.ContentType().String(), "event"
		case matchSubject(n.SubmitAll(), m.Subject):
			ct, kind = wire.TypeRunRequest.ContentType().String(), "submit"
		case matchSubject(n.WorkAll(), m.Subject):
			ct, kind = wire.TypeWork.ContentType().String(), "work"
		case matchSubject(n.RunnerCancel("*"), m.Subject):
			ct, kind = wire.TextContentType.String(), "runner cancel"
			want[m.Reply] = wire.TypeCancelReply.ContentType().String()
		case matchSubject(n.CancelAll(), m.Subject):
			want[m.Reply] = wire.TypeCancelReply.ContentType().String()
			kinds["cancel request"]++
			continue
		case m.Subject == n.SweeperReconcile():
			want[m.Reply] = wire.TextContentType.String()
			kinds["reconcile request"]++
			continue
		default:
			continue
		}
		kinds[kind]++
		if got := m.Header.Get(wire.ContentTypeHeader); got != ct {
			t.Errorf("%s: Content-Type %q, want %q", m.Subject, got, ct)
		}
		if mt, err := wire.ParseMessageType(ct); err == nil {
			if got, err := wire.Sniff(m.Data); err != nil || got != mt {
				t.Errorf("%s: body sniffed as %q, %v; its Content-Type says %s", m.Subject, got, err, mt)
			}
		}
	}
	for _, m := range msgs {
		if ct, ok := want[m.Subject]; ok {
			kinds["reply "+ct]++
			if got := m.Header.Get(wire.ContentTypeHeader); got != ct {
				t.Errorf("reply on %s: Content-Type %q, want %q", m.Subject, got, ct)
			}
		}
	}
	for _, k := range []string{"event", "submit", "work", "runner cancel", "cancel request", "reconcile request",
		"reply " + wire.TypeCancelReply.ContentType().String(), "reply " + wire.TextContentType.String()} {
		if kinds[k] == 0 {
			t.Errorf("no %s seen (seen: %v)", k, kinds)
		}
	}
}

// requestOf is the run request f builds, and its adapter request's fields.
func requestOf(t *testing.T, f runFlags, prompt string) (wire.RunRequest, map[string]any) {
	t.Helper()
	req, err := f.request(prompt)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := wire.DecodeStrict(req.Request, &m); err != nil {
		t.Fatal(err)
	}
	return req, m
}

func TestRunSetArraysAndLabels(t *testing.T) {
	io, _, _ := testIO(nil)
	f, prompt, err := parseRun([]string{"-p", "gemini", "hi",
		"--set", "dirs=[src, docs]", "--set", "nums=[1,2.5,true]", "--set", "none=[]", "--set", `quoted=["a,b",c]`,
		"--set", `json=["x",["y"]]`, "--set", "word=plain [text]",
		"--label", "team=infra", "--label", "note=a=b", "--label", "empty="}, io)
	if err != nil {
		t.Fatal(err)
	}
	req, m := requestOf(t, f, prompt)
	got, _ := json.Marshal(m)
	want := `{"dirs":["src","docs"],"json":["x",["y"]],"none":[],"nums":[1,2.5,true],"prompt":"hi","quoted":["a,b","c"],"word":"plain [text]"}`
	if string(got) != want {
		t.Errorf("request = %s\nwant      %s", got, want)
	}
	if wantL := map[string]string{"team": "infra", "note": "a=b", "empty": ""}; !maps.Equal(req.Labels, wantL) {
		t.Errorf("labels = %v, want %v", req.Labels, wantL)
	}

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unclosed list", []string{"--set", "dirs=[a,b"}, "no closing ]"},
		{"empty element", []string{"--set", "dirs=[a,,b]"}, "element 2 is empty"},
		{"bad quoted element", []string{"--set", `dirs=["a,b]`}, "not closed"},
		{"bad nested element", []string{"--set", `dirs=[a,{b}]`}, "is not JSON"},
		{"key set twice", []string{"--set", "a=1", "--set", "a=2"}, "a is set twice"},
		{"label without =", []string{"--label", "team"}, "want key=value"},
		{"label without key", []string{"--label", "=x"}, "want key=value"},
		{"label twice", []string{"--label", "a=1", "--label", "a=2"}, "label a is set twice"},
		{"label key too long", []string{"--label", strings.Repeat("k", wire.MaxLabelKey+1) + "=v"}, "key must be 1 to 64 bytes"},
		{"label value too long", []string{"--label", "k=" + strings.Repeat("v", wire.MaxLabelValue+1)}, "value at most 256"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			io, _, errOut := testIO(nil)
			_, _, err := parseRun(append([]string{"-p", "fixture", "hi"}, tt.args...), io)
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(errOut.String(), tt.want) {
				t.Errorf("parseRun: %v, stderr %q; want exit 2 with %q", err, errOut, tt.want)
			}
		})
	}
	t.Run("too many labels", func(t *testing.T) {
		args := []string{"-p", "fixture", "hi"}
		for i := range wire.MaxLabels + 1 {
			args = append(args, "--label", fmt.Sprintf("k%d=v", i))
		}
		io, _, errOut := testIO(nil)
		if _, _, err := parseRun(args, io); err == nil || !strings.Contains(errOut.String(), "33 entries, at most 32") {
			t.Errorf("parseRun: %v, stderr %q", err, errOut)
		}
	})
}

// FuzzDecodeBody holds decode's body handling to its contract on any
// input, seeded with the goldens of testdata/decode: no panic, and one
// line of valid JSON for whatever it accepts.
func FuzzDecodeBody(f *testing.F) {
	bins, err := filepath.Glob("../../testdata/decode/*.bin")
	if err != nil || len(bins) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, bin := range bins {
		b, err := os.ReadFile(bin)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"swept":1}`))
	f.Add([]byte("acme.run-1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, typ := range []string{"", typeText, typeJSON} {
			out, err := decodeBody(typ, b)
			if err == nil && (!json.Valid(out) || bytes.ContainsAny(out, "\n")) {
				t.Fatalf("decode --type %q accepted % x and wrote %q, not one line of JSON", typ, b, out)
			}
		}
	})
}
