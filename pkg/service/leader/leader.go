// Package leader reads JetStream state from a stream's leader, never from
// a replica: what decides a run's next seq or state (its last event, its
// record, its lease) must see every write the leader has confirmed.
package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LastMsg reads the last message on subj in stream with the JetStream
// API's STREAM.MSG.GET, which only the stream's leader answers. It returns
// jetstream.ErrMsgNotFound if subj has none. It blocks for one round trip.
//
// jetstream.Stream.GetLastMsgForSubject does not: nats.go v1.55 sends a
// direct get ($JS.API.DIRECT.GET) whenever the stream's cached info says
// AllowDirect, as the events stream's does, and any replica may answer a
// direct get — including one that has not applied the latest publishes
// yet, which then says "not found" or returns an older message. What
// decides a run's next seq or its state must not be read that way; clients
// that only display may keep using direct gets.
func LastMsg(ctx context.Context, js jetstream.JetStream, stream, subj string) (*jetstream.RawStreamMsg, error) {
	return msgGet(ctx, js, stream, struct {
		LastFor string `json:"last_by_subj"`
	}{subj})
}

// NextMsg reads, like LastMsg from the stream's leader, the first message
// on subj (which may hold wildcards) in stream at sequence seq or after;
// jetstream.ErrMsgNotFound if there is none. It blocks for one round
// trip. A reader that walks a subject's messages in order this way sees
// every message the leader stored before it asked.
func NextMsg(ctx context.Context, js jetstream.JetStream, stream string, seq uint64, subj string) (*jetstream.RawStreamMsg, error) {
	return msgGet(ctx, js, stream, struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
	}{seq, subj})
}

// msgGet sends the STREAM.MSG.GET request get to stream's leader.
func msgGet(ctx context.Context, js jetstream.JetStream, stream string, get any) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(get)
	if err != nil {
		return nil, err
	}
	resp, err := js.Conn().RequestWithContext(ctx, apiPrefix(js)+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, err
	}
	var r struct {
		Error   *jetstream.APIError `json:"error,omitempty"`
		Message *struct {
			Subject  string    `json:"subject"`
			Sequence uint64    `json:"seq"`
			Header   []byte    `json:"hdrs,omitempty"`
			Data     []byte    `json:"data,omitempty"`
			Time     time.Time `json:"time"`
		} `json:"message,omitempty"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("decode message get reply: %w", err)
	}
	switch {
	case r.Error != nil && r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrMsgNotFound
	case r.Error != nil:
		return nil, r.Error
	case r.Message == nil:
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	msg := &jetstream.RawStreamMsg{Subject: r.Message.Subject, Sequence: r.Message.Sequence, Data: r.Message.Data, Time: r.Message.Time}
	if len(r.Message.Header) > 0 {
		if msg.Header, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return nil, fmt.Errorf("decode message get reply headers: %w", err)
		}
	}
	return msg, nil
}

// apiPrefix is the JetStream API prefix js sends its requests with.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	default:
		return jetstream.DefaultAPIPrefix
	}
}

// KeyValue reads the current value of key in bucket from the bucket's
// stream leader. A key never written, deleted or purged is
// jetstream.ErrKeyNotFound. It returns the value and its revision.
func KeyValue(ctx context.Context, js jetstream.JetStream, bucket, key string) ([]byte, uint64, error) {
	msg, err := LastMsg(ctx, js, "KV_"+bucket, "$KV."+bucket+"."+key)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, jetstream.ErrKeyNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	if op := msg.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return nil, 0, jetstream.ErrKeyNotFound
	}
	return msg.Data, msg.Sequence, nil
}
