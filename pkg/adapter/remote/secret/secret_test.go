package secret_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/secret"
	"github.com/vmihailenco/msgpack/v5"
)

func TestSecretNeverRenders(t *testing.T) {
	const v = "sk-live-very-secret-value"
	s := secret.New(v)
	type holder struct{ Key secret.String }
	var outs []string
	outs = append(outs, fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q %x", s, s, s, s, s, s), fmt.Sprintf("%+v %#v", holder{s}, holder{s}))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "key", s, "h", holder{s})
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "key", s)
	outs = append(outs, buf.String())
	if b, err := json.Marshal(holder{s}); err == nil {
		outs = append(outs, string(b))
	}
	if b, err := msgpack.Marshal(holder{s}); err == nil {
		outs = append(outs, string(b))
	}
	for _, o := range outs {
		if strings.Contains(o, v) {
			t.Fatalf("secret leaked: %s", o)
		}
	}
	if _, err := json.Marshal(holder{s}); err == nil {
		t.Error("json encoding of a secret succeeded")
	}
	if _, err := msgpack.Marshal(holder{s}); err == nil {
		t.Error("msgpack encoding of a secret succeeded")
	}
	if s.Reveal() != v || s.Empty() || !secret.New("").Empty() {
		t.Error("Reveal/Empty")
	}
}
