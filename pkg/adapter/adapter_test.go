package adapter_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/adapter"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// fake is an adapter whose instances differ only in setting, which its
// Validate returns.
type fake struct {
	name, setting string
	caps          wire.Capabilities
}

func (f fake) Name() string                    { return f.name }
func (f fake) Capabilities() wire.Capabilities { return f.caps }
func (f fake) RuntimeKeys() []string           { return nil }
func (f fake) Validate([]byte) (any, error)    { return f.setting, nil }
func (f fake) Stream(context.Context, adapter.Call) iter.Seq2[wire.Chunk, error] {
	return func(yield func(wire.Chunk, error) bool) {
		yield(wire.Chunk{Type: wire.ChunkText, Content: f.setting}, nil)
	}
}

var remote = wire.Capabilities{Transport: wire.TransportRemote}

func TestForWork(t *testing.T) {
	reg, err := adapter.NewRegistry(fake{name: "openai", setting: "first", caps: remote}, fake{name: "bare", setting: "bare", caps: remote})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ profile, setting string }{{"a", "first"}, {"b", "second"}} {
		if err := reg.AddProfile(p.profile, fake{name: "openai", setting: p.setting, caps: remote}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name             string
		adapter, profile string
		want             string // the instance's setting
		wantErr          error  // of Validate and Stream
		wantMissing      bool
	}{
		{name: "first profile", adapter: "openai", profile: "a", want: "first"},
		{name: "second profile", adapter: "openai", profile: "b", want: "second"},
		{name: "work without a profile", adapter: "openai", profile: "", want: "first"},
		{name: "bare adapter serves any profile", adapter: "bare", profile: "anything", want: "bare"},
		{name: "profile not held", adapter: "openai", profile: "c", wantErr: wire.ProfileError},
		{name: "profile of another adapter", adapter: "bare", profile: "a", want: "bare"},
		{name: "unknown adapter", adapter: "nope", profile: "a", wantMissing: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok := reg.ForWork(tt.adapter, tt.profile)
			if ok == tt.wantMissing {
				t.Fatalf("ForWork ok = %t, want %t", ok, !tt.wantMissing)
			}
			if !ok {
				return
			}
			if a.Name() != tt.adapter || a.Capabilities() != remote {
				t.Fatalf("ForWork = %s %+v, want adapter %s's declaration", a.Name(), a.Capabilities(), tt.adapter)
			}
			got, err := a.Validate(nil)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && got != tt.want) {
				t.Fatalf("Validate = %v, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
			for c, err := range a.Stream(context.Background(), adapter.Call{}) {
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && c.Content != tt.want) {
					t.Fatalf("Stream = %+v, %v; want %q, %v", c, err, tt.want, tt.wantErr)
				}
				if we := wire.AsError(err); err != nil && we.Retryable {
					t.Fatalf("Stream error %v is retryable", we)
				}
			}
		})
	}
}

// Once an adapter has instances per profile, its work naming a profile of
// another adapter is refused: that instance's settings are not its own.
func TestForWorkProfileOfAnotherAdapter(t *testing.T) {
	reg, err := adapter.NewRegistry(fake{name: "openai", caps: remote}, fake{name: "bare", caps: remote})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.AddProfile("a", fake{name: "openai", setting: "a", caps: remote}); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddProfile("z", fake{name: "bare", setting: "z", caps: remote}); err != nil {
		t.Fatal(err)
	}
	a, _ := reg.ForWork("bare", "a")
	if _, err := a.Validate(nil); !errors.Is(err, wire.ProfileError) {
		t.Fatalf("work of adapter bare naming openai's profile: Validate = %v, want ProfileError", err)
	}
}

func TestAddProfileRefuses(t *testing.T) {
	reg, err := adapter.NewRegistry(fake{name: "openai", caps: remote})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.AddProfile("a", fake{name: "openai", caps: remote}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		profile string
		in      adapter.Adapter
		wantErr error // nil: any error
	}{
		{name: "second instance of a profile", profile: "a", in: fake{name: "openai", caps: remote}, wantErr: adapter.ErrDuplicate},
		{name: "unregistered adapter", profile: "b", in: fake{name: "ollama", caps: remote}},
		{name: "other declaration", profile: "b", in: fake{name: "openai", caps: wire.Capabilities{Transport: wire.TransportRemote, ReportsUsage: true}}, wantErr: wire.ProfileError},
		{name: "invalid declaration", profile: "b", in: fake{name: "openai"}, wantErr: wire.ProfileError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := reg.AddProfile(tt.profile, tt.in)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("AddProfile = %v, want %v", err, tt.wantErr)
			}
			if _, ok := reg.ForProfile(tt.profile); ok && tt.profile != "a" {
				t.Fatalf("refused profile %s is registered", tt.profile)
			}
		})
	}
}

// TestCheckCapabilities: a declaration names one of the three transports,
// and resumable holds exactly when resume_field names the request field.
func TestCheckCapabilities(t *testing.T) {
	tests := []struct {
		name    string
		in      wire.Capabilities
		wantErr bool
	}{
		{name: "remote", in: remote},
		{name: "in-process, every flag", in: wire.Capabilities{Transport: wire.TransportInProcess, Resumable: true, EmitsToolEvents: true, ReportsUsage: true, ResumeField: "resume"}},
		{name: "subprocess, resumable", in: wire.Capabilities{Transport: wire.TransportSubprocess, Resumable: true, ResumeField: "session"}},
		{name: "no transport", in: wire.Capabilities{}, wantErr: true},
		{name: "unknown transport", in: wire.Capabilities{Transport: "carrier-pigeon"}, wantErr: true},
		{name: "resumable without a resume field", in: wire.Capabilities{Transport: wire.TransportRemote, Resumable: true}, wantErr: true},
		{name: "resume field without resumable", in: wire.Capabilities{Transport: wire.TransportSubprocess, ResumeField: "resume"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := adapter.CheckCapabilities("probe", tt.in)
			switch {
			case !tt.wantErr && err != nil:
				t.Fatalf("CheckCapabilities(%+v) = %v, want nil", tt.in, err)
			case tt.wantErr && !errors.Is(err, wire.ProfileError):
				t.Fatalf("CheckCapabilities(%+v) = %v, want a ProfileError", tt.in, err)
			case tt.wantErr && !strings.Contains(err.Error(), "adapter probe"):
				t.Errorf("error %q does not name the adapter", err)
			}
		})
	}
	// The registry refuses what CheckCapabilities refuses.
	if _, err := adapter.NewRegistry(fake{name: "probe", caps: wire.Capabilities{Transport: wire.TransportRemote, Resumable: true}}); !errors.Is(err, wire.ProfileError) {
		t.Errorf("NewRegistry with a contradictory declaration = %v, want a ProfileError", err)
	}
}

func TestRunModel(t *testing.T) {
	tests := []struct {
		name, pinned, requested, want, wantErr string
	}{
		{name: "pinned", pinned: "m1", want: "m1"},
		{name: "pinned, the same requested", pinned: "m1", requested: "m1", want: "m1"},
		{name: "not pinned, requested", requested: "m2", want: "m2"},
		{name: "neither", want: ""},
		{name: "another than the pinned", pinned: "m1", requested: "m2", wantErr: `demo request: field "model": "m2" is not the pinned model "m1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := adapter.Call{Model: tt.pinned}.RunModel("demo", tt.requested)
			if tt.wantErr != "" {
				if !errors.Is(err, wire.AgenticRequestValidationError) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("RunModel = %q, %v; want an AgenticRequestValidationError %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("RunModel = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
