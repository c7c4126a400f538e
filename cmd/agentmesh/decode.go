package main

// agentmesh decode: one message from stdin to JSON on stdout, the filter
// natscli's --translate runs. natscli (cli/util.go, filterDataThroughCmd)
// expands the command as a Go template (with {{Subject}} and {{Stream}}),
// splits it into words without a shell, runs it once per message with
// the body on stdin and nothing else (no headers), and prints the
// command's combined stdout and stderr; a non-zero exit makes it print
// the output quoted with "Error while translating msg body". So decode
// reads stdin to its end, writes one line, and on bad input writes one
// line naming the problem and exits 1.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// The bodies decode takes besides the wire message types: a text body (a
// session id, the run key a router sends a runner) and a JSON one (the
// sweeper's counts, a stored trajectory).
const (
	typeText = "text"
	typeJSON = "json"
)

// errEmptyBody is decode's answer to a message with no body (a cancel
// request, a direct get): there is nothing to decode.
var errEmptyBody = errors.New("empty body: nothing to decode (cancel requests and JetStream API requests carry none)")

// cmdDecode decodes one message read from stdin.
func cmdDecode(_ context.Context, args []string, io *stdio) error {
	fs := newFlagSet("decode", "[--type T | --subject S] < message", io)
	typ := fs.String("type", "", "the message type, or its Content-Type header: "+strings.Join(decodeTypes(), ", ")+" (default: from --subject, else from the message's keys)")
	subj := fs.String("subject", "", "the subject the message was published on or stored under (natscli: --subject {{Subject}}); an empty or unknown one is ignored")
	prefix := fs.String("prefix", io.envOr("AGENTMESH_PREFIX", ""), "deployment prefix of subjects and buckets (default from $AGENTMESH_PREFIX)")
	indent := fs.Bool("indent", false, "indent the JSON")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usageErr("decode: unexpected argument %q: the message is read from stdin", pos[0])
	}
	t := *typ
	if t == "" && *subj != "" {
		t = typeOfSubject(subject.Names{Prefix: *prefix}, *subj)
	}
	if t != "" && t != typeText && t != typeJSON {
		mt, err := wire.ParseMessageType(t)
		if err != nil {
			return usageErr("decode: --type: %v (or %s, %s)", err, typeText, typeJSON)
		}
		t = string(mt)
	}
	body, err := readBody(io.stdin)
	if err != nil {
		return &exitError{code: exitFail, err: fmt.Errorf("decode: %w", err)}
	}
	out, err := decodeBody(t, body)
	if err != nil {
		return &exitError{code: exitFail, err: fmt.Errorf("decode: %w", err)}
	}
	if *indent {
		var b bytes.Buffer
		if err := json.Indent(&b, out, "", "  "); err != nil {
			return fmt.Errorf("decode: indent: %w", err)
		}
		out = b.Bytes()
	}
	_, err = io.stdout.Write(append(out, '\n'))
	return err
}

func decodeTypes() []string {
	var out []string
	for _, t := range wire.MessageTypes() {
		out = append(out, string(t))
	}
	return append(out, typeText, typeJSON)
}

// readBody reads one message from r, at most wire.MaxMessageSize bytes.
func readBody(r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, errors.New("no stdin")
	}
	b, err := io.ReadAll(io.LimitReader(r, wire.MaxMessageSize+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read stdin: %w", err)
	case len(b) > wire.MaxMessageSize:
		return nil, fmt.Errorf("%w: more than %d bytes on stdin", wire.ErrTooLarge, wire.MaxMessageSize)
	case len(b) == 0:
		return nil, errEmptyBody
	}
	return b, nil
}

// decodeBody turns body, of type t ("" for: find out), into JSON. With no
// type a msgpack map is sniffed (wire.Sniff) and anything that is JSON
// already is passed on compacted; text is only taken as text when asked.
func decodeBody(t string, body []byte) ([]byte, error) {
	switch t {
	case typeText:
		if !utf8.Valid(body) {
			return nil, errors.New("the body is not UTF-8 text")
		}
		return json.Marshal(string(body))
	case typeJSON:
		return compactBody(body)
	case "":
		mt, err := wire.Sniff(body)
		if err == nil {
			return wire.JSON(mt, body)
		}
		if errors.Is(err, wire.ErrUnknownType) {
			return nil, err // a msgpack map, of no type this build has
		}
		if out, jerr := compactBody(body); jerr == nil {
			return out, nil
		}
		return nil, fmt.Errorf("not an agentmesh message (a msgpack map of one of the types %s, or JSON): %w; starts % x", strings.Join(decodeTypes()[:len(wire.MessageTypes())], ", "), err, body[:min(len(body), 16)])
	}
	return wire.JSON(wire.MessageType(t), body)
}

func compactBody(b []byte) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return out.Bytes(), nil
}

// typeOfSubject is the type of what is published on subject s (a KV
// value's subject $KV.<bucket>.<key> included), or "" for a subject it
// does not know (a reply inbox, an API subject).
func typeOfSubject(n subject.Names, s string) string {
	kvs := []struct {
		bucket, typ string
	}{
		{n.CheckpointsBucket(), string(wire.TypeCheckpoint)},
		{n.ConsentBucket(), string(wire.TypeConsent)},
		{n.ExportsBucket(), string(wire.TypeExportRecord)},
		{n.RedactionBucket(), string(wire.TypeRedactionRules)},
		{n.SessionsBucket(), typeText},
	}
	for _, kv := range kvs {
		if strings.HasPrefix(s, "$KV."+kv.bucket+".") {
			return kv.typ
		}
	}
	if strings.HasPrefix(s, "$KV.") {
		// The runs and leases buckets (named only by pkg/runs): their
		// values' keys tell a record from a lease.
		return ""
	}
	subjects := []struct {
		pattern, typ string
	}{
		{n.EventsAll(), string(wire.TypeEvent)},
		{n.SubmitAll(), string(wire.TypeRunRequest)},
		{n.WorkAll(), string(wire.TypeWork)},
		{n.RunnerCancel("*"), typeText},
	}
	for _, p := range subjects {
		if matchSubject(p.pattern, s) {
			return p.typ
		}
	}
	return ""
}

// matchSubject reports whether subject s matches pattern, whose "*"
// tokens match any one token.
func matchSubject(pattern, s string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(s, ".")
	if len(pt) != len(st) {
		return false
	}
	for i := range pt {
		if pt[i] != "*" && pt[i] != st[i] {
			return false
		}
	}
	return true
}
