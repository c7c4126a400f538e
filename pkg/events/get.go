package events

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// lastFromLeader reads the last message on subj with the JetStream API's
// STREAM.MSG.GET, which only the stream's leader answers.
//
// jetstream.Stream.GetLastMsgForSubject does not: nats.go v1.55 sends a
// direct get ($JS.API.DIRECT.GET) whenever the stream's cached info says
// AllowDirect, as the events stream's does, and any replica may answer a
// direct get — including one that has not applied the latest publishes
// yet, which then says "not found" or returns an older event. What decides
// a run's next seq or its state must not be read that way; clients that
// only display events may keep using direct gets.
func (l *Log) lastFromLeader(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subj})
	if err != nil {
		return nil, err
	}
	resp, err := l.js.Conn().RequestWithContext(ctx, l.api+"STREAM.MSG.GET."+l.stream, req)
	if err != nil {
		return nil, err
	}
	var r struct {
		Error   *jetstream.APIError `json:"error,omitempty"`
		Message *struct {
			Subject  string `json:"subject"`
			Sequence uint64 `json:"seq"`
			Header   []byte `json:"hdrs,omitempty"`
			Data     []byte `json:"data,omitempty"`
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
	msg := &jetstream.RawStreamMsg{Subject: r.Message.Subject, Sequence: r.Message.Sequence, Data: r.Message.Data}
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
