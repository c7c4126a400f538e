package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/subject"
	"github.com/nats-io/nats.go/jetstream"
)

// The OpenAI APIs are stateless on the caller's side: a chat client sends
// the whole history every time, a Responses client the previous
// response's id (or the history inline). The mesh keeps a conversation's
// history itself, in the conversation's checkpoint. Turns maps one onto
// the other, in the agentmesh_turns bucket:
//
//	<tenant>.r.<run_id>  the conversation the run belongs to, and the run
//	                     that continued from it (a point)
//	<tenant>.h.<sha256>  the runs whose success a history (the caller's
//	                     turns and the run's reply, as atoms) ends with
//
// Both are written only once a run has succeeded: a failed run leaves no
// turn behind, so the caller retries from where it was. The tenant leads
// every key: a key of one tenant never finds another's turn.
//
// A point is continued once. The conversation's checkpoint holds the
// latest turn, so continuing an earlier one (regenerating a reply,
// editing an earlier message) would answer from the wrong history; it is
// refused with a 409 (branching is not built). A continuation claims its
// point before it starts (a compare-and-set on the point's revision), so
// two requests racing from one point cannot both run; a claim whose run
// did not succeed is taken over by the next request.

// point is the value of <tenant>.r.<run_id>.
type point struct {
	V            int    `json:"v"`
	Conversation string `json:"conversation"`
	// Sum is the hash of the conversation through this run's reply
	// (chainHash).
	Sum string `json:"sum"`
	// Next is the run that continued from this point, once one claimed it
	// (at Claimed, unix ms); Done, once that run succeeded.
	Next    string `json:"next,omitempty"`
	Claimed int64  `json:"claimed,omitempty"`
	Done    bool   `json:"done,omitempty"`
	Created int64  `json:"created"` // unix ms
}

// historyEntry is the value of <tenant>.h.<sha256>: the runs whose
// success ended with that history, newest first. Two conversations of a
// tenant can be alike turn for turn (the same question, the same
// deterministic reply); each is continued once, so a continuation takes
// the first whose turn is free.
type historyEntry struct {
	V    int      `json:"v"`
	Runs []string `json:"runs"`
}

// maxAlike bounds the runs a history entry keeps.
const maxAlike = 32

// Turns is the gateway's turn store over the agentmesh_turns bucket. It is
// safe for concurrent use.
type Turns struct {
	kv jetstream.KeyValue
}

// OpenTurns opens the turn store; the bucket is created by topology.Ensure.
func OpenTurns(ctx context.Context, js jetstream.JetStream, names subject.Names) (*Turns, error) {
	kv, err := js.KeyValue(ctx, names.TurnsBucket())
	if err != nil {
		return nil, fmt.Errorf("open turns bucket %s: %w", names.TurnsBucket(), err)
	}
	return &Turns{kv: kv}, nil
}

// errNoTurn is a point or history the store does not hold (for this tenant).
var errNoTurn = errors.New("no such turn")

func pointKey(tenant, runID string) string { return tenant + ".r." + runID }
func historyKey(tenant, sum string) string { return tenant + ".h." + sum }

// point reads the point of run runID, with its revision.
func (t *Turns) point(ctx context.Context, tenant, runID string) (point, uint64, error) {
	var p point
	if subject.ValidToken("run id", runID) != nil { // not a run id: no turn of one
		return p, 0, errNoTurn
	}
	e, err := t.kv.Get(ctx, pointKey(tenant, runID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return p, 0, errNoTurn
	}
	if err != nil {
		return p, 0, err
	}
	if err := decodeStrict(e.Value(), &p); err != nil || p.V != 1 || p.Conversation == "" {
		return p, 0, fmt.Errorf("turn %s: a corrupt point: %v", e.Key(), err)
	}
	return p, e.Revision(), nil
}

// history finds the runs whose success ends with the history of sum,
// newest first, with the entry's revision.
func (t *Turns) history(ctx context.Context, tenant, sum string) ([]string, uint64, error) {
	e, err := t.kv.Get(ctx, historyKey(tenant, sum))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, errNoTurn
	}
	if err != nil {
		return nil, 0, err
	}
	var h historyEntry
	if err := decodeStrict(e.Value(), &h); err != nil || h.V != 1 || len(h.Runs) == 0 {
		return nil, 0, fmt.Errorf("turn %s: a corrupt history entry: %v", e.Key(), err)
	}
	return h.Runs, e.Revision(), nil
}

// claim marks the point of run parent (as read at revision rev) continued
// by run next. It fails with errClaimed when another request changed the
// point since it was read.
func (t *Turns) claim(ctx context.Context, tenant, parent string, p point, rev uint64, next string) error {
	p.Next, p.Claimed = next, time.Now().UnixMilli()
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = t.kv.Update(ctx, pointKey(tenant, parent), b, rev)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return errClaimed
	}
	return err
}

var errClaimed = errors.New("the turn was claimed by another request")

// record stores a succeeded run's point and the history it ends with
// (sum), and marks the point it continued (parent, if any) done.
func (t *Turns) record(ctx context.Context, tenant, runID, conversation, sum, parent string) error {
	b, err := json.Marshal(point{V: 1, Conversation: conversation, Sum: sum, Created: time.Now().UnixMilli()})
	if err != nil {
		return err
	}
	if _, err := t.kv.Put(ctx, pointKey(tenant, runID), b); err != nil {
		return err
	}
	if err := t.addHistory(ctx, tenant, sum, runID); err != nil {
		return err
	}
	if parent == "" {
		return nil
	}
	p, _, err := t.point(ctx, tenant, parent)
	if err != nil {
		return err
	}
	p.Next, p.Done = runID, true
	if b, err = json.Marshal(p); err != nil {
		return err
	}
	_, err = t.kv.Put(ctx, pointKey(tenant, parent), b)
	return err
}

// addHistory puts runID first in the history entry of sum, by
// compare-and-set: another gateway recording an alike conversation at the
// same moment makes it read the entry again.
func (t *Turns) addHistory(ctx context.Context, tenant, sum, runID string) error {
	key := historyKey(tenant, sum)
	for attempt := 0; ; attempt++ {
		runs, rev, err := t.history(ctx, tenant, sum)
		if err != nil && !errors.Is(err, errNoTurn) {
			return err
		}
		runs = append([]string{runID}, runs...)
		if len(runs) > maxAlike {
			runs = runs[:maxAlike]
		}
		b, err := json.Marshal(historyEntry{V: 1, Runs: runs})
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = t.kv.Create(ctx, key, b)
		} else {
			_, err = t.kv.Update(ctx, key, b, rev)
		}
		var apiErr *jetstream.APIError
		conflict := errors.Is(err, jetstream.ErrKeyExists) ||
			(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
		if !conflict || attempt == 9 {
			return err
		}
	}
}

// newConversation is a fresh conversation id: 128 random bits, base64url.
func newConversation() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "gw-" + base64.RawURLEncoding.EncodeToString(b)
}

// decodeStrict decodes one JSON value into v, refusing unknown fields.
func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// An atom is one element of a conversation's history in a form that is
// the same for both OpenAI shapes: the text of a system, user or
// assistant turn, a tool call (its id, name and arguments as canonical
// JSON) or a tool result (the call's id and its output).
type atom struct {
	K string `json:"k"`           // system, user, assistant, call, result
	T string `json:"t,omitempty"` // text, or a result's output
	I string `json:"i,omitempty"` // a call's or result's id
	N string `json:"n,omitempty"` // a call's tool name
	A string `json:"a,omitempty"` // a call's arguments, canonical JSON
	// param names where the request holds it, for errors.
	param string
}

// canonical orders each assistant turn as the gateway answers it: its
// text (joined) first, then its calls in order; empty text is left out
// of a turn that has calls. Callers send an assistant turn back as one
// chat message with content and tool_calls, or as Responses items in any
// order; both come out alike.
func canonical(as []atom) []atom {
	out := make([]atom, 0, len(as))
	for i := 0; i < len(as); {
		if as[i].K != "assistant" && as[i].K != "call" {
			out = append(out, atom{K: as[i].K, T: as[i].T, I: as[i].I})
			i++
			continue
		}
		var text string
		var calls []atom
		for ; i < len(as) && (as[i].K == "assistant" || as[i].K == "call"); i++ {
			if as[i].K == "assistant" {
				text += as[i].T
			} else {
				calls = append(calls, atom{K: "call", I: as[i].I, N: as[i].N, A: as[i].A})
			}
		}
		if text != "" || len(calls) == 0 {
			out = append(out, atom{K: "assistant", T: text})
		}
		out = append(out, calls...)
	}
	return out
}

// chainHash extends prev, the hash of a conversation's earlier turns ("" for
// none), with the turns of as: each turn (what one run was asked, then its
// reply) is hashed onto the one before, as hex SHA-256 of the previous
// hash and the turn's canonical atoms as JSON. A turn starts at a system,
// user or result atom that follows the assistant's.
func chainHash(prev string, as []atom) string {
	as = canonical(as)
	for start := 0; start < len(as); {
		end := start + 1
		for end < len(as) && !(isReply(as[end-1]) && !isReply(as[end])) {
			end++
		}
		b, _ := json.Marshal(as[start:end])
		h := sha256.New()
		h.Write([]byte(prev))
		h.Write(b)
		prev = hex.EncodeToString(h.Sum(nil))
		start = end
	}
	return prev
}

func isReply(a atom) bool { return a.K == "assistant" || a.K == "call" }

// canonicalArgs is a call's arguments as canonical JSON: parsed and
// written again (object keys sorted, no insignificant space), so the text
// a caller echoes back hashes alike however it was re-encoded. Text that
// is not JSON is kept as it is.
func canonicalArgs(s string) string {
	var v any
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil || d.More() {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return s
	}
	return string(b)
}
