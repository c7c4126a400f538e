package subject_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/subject"
)

func TestValidToken(t *testing.T) {
	tests := []struct {
		in      string
		wantErr bool
	}{
		{"abc-DEF_123", false},
		{strings.Repeat("a", 64), false},
		{"", true},
		{strings.Repeat("a", 65), true},
		{"a.b", true},
		{"a*", true},
		{"a>", true},
		{"a b", true},
		{"é", true},
	}
	for _, tt := range tests {
		err := subject.ValidToken("tenant", tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ValidToken(%q) = %v, wantErr %t", tt.in, err, tt.wantErr)
		}
		if err != nil && (!errors.Is(err, subject.ErrInvalidToken) || !strings.Contains(err.Error(), "tenant")) {
			t.Errorf("ValidToken(%q) = %v, want ErrInvalidToken naming the field", tt.in, err)
		}
	}
}

func TestNames(t *testing.T) {
	var n subject.Names
	if got := n.Events("t", "r"); got != "agentmesh.events.t.r" {
		t.Errorf("Events = %q", got)
	}
	p := subject.Names{Prefix: "acme"}
	if got := p.Submit("t"); got != "acme.agentmesh.submit.t" {
		t.Errorf("prefixed Submit = %q", got)
	}
	if got := p.RunsBucket(); got != "acme_agentmesh_runs" {
		t.Errorf("prefixed bucket = %q", got)
	}
	for got, want := range map[string]string{
		n.Input("t", "r"): "agentmesh.control.t.r.input", n.InputAll(): "agentmesh.control.*.*.input",
		n.Permission("t", "r"): "agentmesh.control.t.r.permission", n.PermissionAll(): "agentmesh.control.*.*.permission",
		n.RunnerInput("x"): "agentmesh.runner.x.input", n.RunnerPermission("x"): "agentmesh.runner.x.permission",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if got := n.Cancel("t", "r"); got != "agentmesh.control.t.r.cancel" {
		t.Errorf("Cancel = %q", got)
	}
}

// A work item's Nats-Msg-Id names its run in either form; anything else
// is refused.
func TestSplitWorkMsgID(t *testing.T) {
	for id, want := range map[string]string{
		subject.RunMsgID("acme", "r1"):           "acme/r1",
		subject.FallbackMsgID("acme", "r1", "b"): "acme/r1",
		"acme":                                   "",
		"acme.r1.":                               "",
		"acme.r1.b.c":                            "",
		"acme..b":                                "",
	} {
		tenant, runID, err := subject.SplitWorkMsgID(id)
		got := tenant + "/" + runID
		if err != nil {
			got = ""
		}
		if got != want {
			t.Errorf("SplitWorkMsgID(%q) = %q, %v; want %q", id, got, err, want)
		}
	}
}
