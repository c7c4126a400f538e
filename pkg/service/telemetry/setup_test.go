package telemetry

import (
	"errors"
	"strings"
	"testing"
)

func TestSelectedReadsTheStandardVariables(t *testing.T) {
	tests := []struct {
		name         string
		in           map[string]string
		wantOn       bool
		wantProtocol string
		wantErr      string // the variable the error names
	}{
		{name: "nothing set", in: nil},
		{name: "endpoint", in: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, wantOn: true, wantProtocol: "http/protobuf"},
		{name: "traces endpoint", in: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, wantOn: true, wantProtocol: "http/protobuf"},
		{name: "otlp exporter, default endpoint", in: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, wantOn: true, wantProtocol: "http/protobuf"},
		{name: "none wins over an endpoint", in: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "none in a list", in: map[string]string{"OTEL_TRACES_EXPORTER": "otlp, none"}},
		{name: "sdk disabled", in: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "sdk not disabled", in: map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, wantOn: true, wantProtocol: "http/protobuf"},
		{name: "grpc", in: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantOn: true, wantProtocol: "grpc"},
		{name: "traces protocol wins", in: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, wantOn: true, wantProtocol: "http/protobuf"},
		{name: "unknown exporter", in: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "OTEL_TRACES_EXPORTER"},
		{name: "json protocol", in: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, wantErr: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{name: "bad general protocol", in: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "udp"}, wantErr: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "bad protocol, tracing off", in: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "udp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			protocol, on, err := selected(func(k string) string { return tt.in[k] })
			if tt.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr+":") {
					t.Fatalf("err = %v, want an ErrConfig naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || on != tt.wantOn || protocol != tt.wantProtocol {
				t.Fatalf("selected = %q, %v, %v; want %q, %v, nil", protocol, on, err, tt.wantProtocol, tt.wantOn)
			}
		})
	}
}
