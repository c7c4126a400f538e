// Package telemetrytest is an in-process OTLP/HTTP trace collector for
// tests: an httptest server that decodes each protobuf
// ExportTraceServiceRequest it is sent and keeps its spans, flattened with
// their resource's service.name, for a test to check the trace they form.
package telemetrytest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span.
type Span struct {
	Service  string // the resource's service.name
	TraceID  string // hex
	SpanID   string // hex
	ParentID string // hex; "" for a root span
	Name     string
	Kind     tracepb.Span_SpanKind
	Attrs    map[string]string // every attribute, its value rendered as text
	Status   *tracepb.Status
	proto    *tracepb.Span
	resource []*commonpb.KeyValue
}

// Collector is a running test collector. Its methods are safe for
// concurrent use.
type Collector struct {
	srv      *httptest.Server
	mu       sync.Mutex
	spans    []Span
	requests int
	bad      []error
}

// Start starts a collector that is closed when the test ends.
func Start(t testing.TB) *Collector {
	c := &Collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(func() {
		c.srv.Close()
		for _, err := range c.Errors() {
			t.Errorf("telemetrytest: %v", err)
		}
	})
	return c
}

// URL is the collector's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the
// exporter appends /v1/traces).
func (c *Collector) URL() string { return c.srv.URL }

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	if err := c.receive(r); err != nil {
		c.mu.Lock()
		c.bad = append(c.bad, err)
		c.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, _ := proto.Marshal(&collpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

func (c *Collector) receive(r *http.Request) error {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		return fmt.Errorf("%s %s: want POST /v1/traces", r.Method, r.URL.Path)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		return fmt.Errorf("content type %q: want application/x-protobuf", ct)
	}
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			return fmt.Errorf("gzip body: %w", err)
		}
		body = z
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	var req collpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		return fmt.Errorf("decode ExportTraceServiceRequest: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	for _, rs := range req.GetResourceSpans() {
		res := rs.GetResource().GetAttributes()
		service := attrs(res)["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, Span{
					Service: service, TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
					Attrs: attrs(s.GetAttributes()), Status: s.GetStatus(), proto: s, resource: res,
				})
			}
		}
	}
	return nil
}

// Spans returns the spans received so far, in the order received.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Requests is the number of export requests received.
func (c *Collector) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

// Errors are the requests the collector refused (undecodable, or not an
// OTLP/HTTP protobuf trace export); Start's cleanup fails the test on any.
func (c *Collector) Errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.bad...)
}

// Text is every string s exports: its name, the keys and values of its
// attributes, its events' and links' names and attributes, its status
// message and its resource's attributes, for a test to search for text
// that must not be there.
func (s Span) Text() []string {
	var out []string
	kv := func(kvs []*commonpb.KeyValue) {
		for _, a := range kvs {
			out = append(out, a.GetKey(), render(a.GetValue()))
		}
	}
	out = append(out, s.Name, s.Status.GetMessage(), s.proto.GetTraceState())
	kv(s.proto.GetAttributes())
	kv(s.resource)
	for _, e := range s.proto.GetEvents() {
		out = append(out, e.GetName())
		kv(e.GetAttributes())
	}
	for _, l := range s.proto.GetLinks() {
		out = append(out, l.GetTraceState())
		kv(l.GetAttributes())
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, a := range kvs {
		m[a.GetKey()] = render(a.GetValue())
	}
	return m
}

// render is an attribute value as text: a string as itself, a number or
// bool in Go's format, an array as its elements joined by commas.
func render(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_BytesValue:
		return string(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, render(e))
		}
		return strings.Join(parts, ",")
	case *commonpb.AnyValue_KvlistValue:
		var parts []string
		for _, e := range x.KvlistValue.GetValues() {
			parts = append(parts, e.GetKey()+"="+render(e.GetValue()))
		}
		sort.Strings(parts)
		return strings.Join(parts, ",")
	}
	return ""
}

// ClearEnv empties, for the rest of the test, every OTEL_* variable of the
// process environment, so that what turns tracing on, or points it
// elsewhere, is only what the test sets.
func ClearEnv(t testing.TB) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
		}
	}
}
