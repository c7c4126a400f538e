package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSandboxCheck: on this machine (make test needs one that can build
// the sandbox) the check passes and says how runs are limited; a bad
// cgroup directory is named; sandbox run runs a command confined.
func TestSandboxCheck(t *testing.T) {
	runCheck := func(env map[string]string, args ...string) (int, string) {
		var out bytes.Buffer
		io := &stdio{stdin: strings.NewReader(""), stdout: &out, stderr: &out, getenv: func(k string) string { return env[k] }}
		return run(context.Background(), append([]string{"sandbox"}, args...), io), out.String()
	}
	code, out := runCheck(nil, "check")
	if code != exitOK || !strings.Contains(out, "sandbox: ok") || !strings.Contains(out, "limits: ") {
		t.Fatalf("sandbox check = %d:\n%s", code, out)
	}
	bad := t.TempDir()
	if code, out := runCheck(map[string]string{"AGENTMESH_SANDBOX_CGROUP": bad}, "check"); code != exitFail || !strings.Contains(out, "AGENTMESH_SANDBOX_CGROUP "+bad) {
		t.Fatalf("sandbox check with a bad cgroup = %d:\n%s", code, out)
	}
	// A command run confined has no capabilities and sees no host process.
	code, out = runCheck(map[string]string{"PATH": "/usr/bin:/bin"}, "run", "--", "sh", "-c", "grep CapEff /proc/self/status; ls /proc | grep -c '^[0-9]'")
	if code != exitOK || !strings.Contains(out, "CapEff:\t0000000000000000") {
		t.Fatalf("sandbox run = %d:\n%s", code, out)
	}
	if n := strings.TrimSpace(out[strings.LastIndexByte(strings.TrimSpace(out), '\n')+1:]); n == "" || len(n) > 1 {
		t.Errorf("sandbox run sees %q processes in /proc, want a few", n)
	}
	if code, _ := runCheck(nil, "check", "extra"); code != exitUsage {
		t.Fatalf("sandbox check extra = %d, want usage", code)
	}
}
