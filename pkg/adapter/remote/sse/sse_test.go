package sse_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter/remote/sse"
)

func TestReader(t *testing.T) {
	in := ": comment\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\n" +
		"data: line1\ndata: line2\nid: 7\n\n" +
		"event: ping\n\n" + // no data: not dispatched
		"event: last\ndata: tail" // no blank line at the end
	r := sse.NewReader(strings.NewReader(in))
	want := []sse.Event{
		{Event: "message_start", Data: []byte(`{"a":1}`)},
		{Event: "message", Data: []byte("line1\nline2"), ID: "7"},
		{Event: "last", Data: []byte("tail"), ID: "7"},
	}
	for i, w := range want {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got.Event != w.Event || string(got.Data) != string(w.Data) || got.ID != w.ID {
			t.Fatalf("event %d = %+v, want %+v", i, got, w)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("event: a\ndata: b\n\n"))
	f.Add([]byte("data: x\r\n\r\ndata"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := sse.NewReader(strings.NewReader(string(b)))
		for range 10000 {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if ev.Event == "" {
				t.Fatal("event without a name")
			}
		}
	})
}
