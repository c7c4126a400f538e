// Package convlog keeps each conversation's runs, in the order the mesh
// accepted them: the index from a conversation to the run events that
// hold its turns (docs/contract.md §2.3, agentmesh_conversations). A
// router records a run as it routes it (Record); a client reads the log
// (Decode) and then each run's events, to give a conversation's history
// (client.History).
//
// The value under <tenant>.<conversation> is one JSON document, written
// by compare-and-set, so that a redelivered submission or two routers
// recording at once neither duplicate nor lose a run. It is bounded: the
// newest MaxRuns runs, within MaxBytes, each prompt cut at MaxPrompt.
package convlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/pkg/service/leader"
	"github.com/agentmesh/agentmesh/pkg/subject"
)

// Bounds of a conversation's log.
const (
	// MaxRuns is how many runs a log keeps: the newest.
	MaxRuns = 256
	// MaxPrompt is the most of a run's first prompt a log keeps, in bytes;
	// a longer one is cut (at a rune boundary) and marked truncated.
	MaxPrompt = 32 << 10
	// MaxBytes bounds the encoded log, under the default NATS max payload
	// of 1 MiB: the oldest runs go first.
	MaxBytes = 768 << 10
)

// Version is the log's document version (its "v").
const Version = 1

// Run is one run of a conversation: its id, when the router accepted it
// (unix ms), and its first turn's prompt (the request's "prompt"; later
// turns' prompts are the run's input chunks).
type Run struct {
	RunID           string `json:"run_id"`
	Created         int64  `json:"created"`
	Prompt          string `json:"prompt,omitempty"`
	PromptTruncated bool   `json:"prompt_truncated,omitempty"`
}

// Log is a conversation's runs, oldest first.
type Log struct {
	V    int   `json:"v"`
	Runs []Run `json:"runs"`
}

// Decode reads a log value, refusing an unknown field or version.
func Decode(b []byte) (Log, error) {
	var l Log
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&l); err != nil {
		return Log{}, fmt.Errorf("conversation log: %w", err)
	}
	if l.V != Version {
		return Log{}, fmt.Errorf("conversation log: version %d, want %d", l.V, Version)
	}
	return l, nil
}

// Cut bounds a prompt to MaxPrompt bytes, at a rune boundary.
func Cut(prompt string) (string, bool) {
	if len(prompt) <= MaxPrompt {
		return prompt, false
	}
	n := MaxPrompt
	for n > 0 && !utf8.RuneStart(prompt[n]) {
		n--
	}
	return prompt[:n], true
}

// add appends r to l unless l has it, then drops the oldest runs past
// the bounds. It reports whether l changed.
func (l *Log) add(r Run) ([]byte, bool, error) {
	for _, have := range l.Runs {
		if have.RunID == r.RunID {
			return nil, false, nil
		}
	}
	r.Prompt, r.PromptTruncated = Cut(r.Prompt)
	l.V = Version
	l.Runs = append(l.Runs, r)
	if len(l.Runs) > MaxRuns {
		l.Runs = l.Runs[len(l.Runs)-MaxRuns:]
	}
	for {
		b, err := json.Marshal(l)
		if err != nil || len(b) <= MaxBytes || len(l.Runs) == 1 {
			return b, true, err
		}
		l.Runs = l.Runs[1:]
	}
}

// Record appends run r to the log of tenant's conversation in kv (the
// conversations bucket), once: a run already there is left as it is. It
// reads the log from the bucket's leader and writes it back by
// compare-and-set, reading again when another writer came first.
func Record(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, tenant, conversation string, r Run) error {
	key := subject.ConversationKey(tenant, conversation)
	for attempt := 0; ; attempt++ {
		var l Log
		b, rev, err := leader.KeyValue(ctx, js, kv.Bucket(), key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("read the log of conversation %s: %w", conversation, err)
		default:
			if l, err = Decode(b); err != nil {
				return fmt.Errorf("the log of conversation %s: %w", conversation, err)
			}
		}
		v, changed, err := l.add(r)
		if err != nil || !changed {
			return err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, v)
		} else {
			_, err = kv.Update(ctx, key, v, rev)
		}
		var apiErr *jetstream.APIError
		conflict := errors.Is(err, jetstream.ErrKeyExists) ||
			(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
		if !conflict || attempt == 15 {
			if err != nil {
				return fmt.Errorf("record run %s in conversation %s: %w", r.RunID, conversation, err)
			}
			return nil
		}
	}
}
