package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/mesh"
	"github.com/agentmesh/agentmesh/pkg/mesh/meshtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
)

// TestClientThroughTLSAndNkeys: the client commands reach a mesh on a
// server that requires TLS client certificates and an nkey, with the
// credentials from the flags or from the AGENTMESH_NATS_* variables, and
// fail with exit code 2 and a reason when one is missing or bad.
func TestClientThroughTLSAndNkeys(t *testing.T) {
	srv, sec := natstest.RunSecure(t)
	meshtest.StartWith(t, service.Config{NatsURL: srv.ClientURL(), ShutdownTimeout: 10 * time.Second, NATSAuth: service.NATSAuth{
		NatsNkey: sec.Seed, NatsTLSCa: sec.CA, NatsTLSCert: sec.ClientCert, NatsTLSKey: sec.ClientKey, NatsTLSServerName: natstest.SecureServerName,
	}}, mesh.Config{})
	ctx := context.Background()

	flags := []string{"--server", srv.ClientURL(), "--nkey", sec.Seed, "--tls-ca", sec.CA, "--tls-cert", sec.ClientCert, "--tls-key", sec.ClientKey, "--tls-server-name", natstest.SecureServerName}
	env := servicetest.SecureEnv(sec)
	env["AGENTMESH_NATS_URL"] = srv.ClientURL()
	without := func(k string) map[string]string {
		out := map[string]string{}
		for kk, v := range env {
			if kk != k {
				out[kk] = v
			}
		}
		return out
	}
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		wantErr  string
	}{
		{name: "flags", args: append([]string{"run", "-p", "fixture"}, append(flags, "hi")...), wantCode: exitOK},
		{name: "variables", args: []string{"run", "-p", "fixture", "hi"}, env: env, wantCode: exitOK},
		{name: "no nkey", args: []string{"run", "-p", "fixture", "hi"}, env: without("AGENTMESH_NATS_NKEY"), wantCode: exitUsage, wantErr: "nats: Authorization Violation"},
		{name: "wrong nkey", args: []string{"run", "-p", "fixture", "--nkey", sec.StrangerSeed, "hi"}, env: env, wantCode: exitUsage, wantErr: "nats: Authorization Violation"},
		{name: "no CA", args: []string{"run", "-p", "fixture", "hi"}, env: without("AGENTMESH_NATS_TLS_CA"), wantCode: exitUsage, wantErr: "certificate signed by unknown authority"},
		{name: "nkey file missing", args: []string{"run", "-p", "fixture", "--nkey", sec.Seed + ".absent", "hi"}, env: env, wantCode: exitUsage,
			wantErr: "agentmesh: config: --nkey/AGENTMESH_NATS_NKEY: read " + sec.Seed + ".absent: no such file or directory"},
		{name: "key without certificate", args: []string{"status", "--tls-cert", "", "r1"}, env: env, wantCode: exitUsage,
			wantErr: "agentmesh: config: --tls-cert/AGENTMESH_NATS_TLS_CERT: must be set with --tls-key/AGENTMESH_NATS_TLS_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			io, out, errOut := testIO(tt.env)
			code := run(ctx, tt.args, io)
			if code != tt.wantCode || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Fatalf("exit code %d, stderr %q; want %d and %q (stdout:\n%s)", code, errOut, tt.wantCode, tt.wantErr, out)
			}
			if tt.wantCode == exitOK && !strings.Contains(out.String(), "[succeeded") {
				t.Fatalf("stdout:\n%s\nwant a succeeded run", out)
			}
		})
	}
}

// TestUpRefusesAMisspeltVariable: agentmesh up fails with exit code 2,
// naming the variable and the one meant, before it starts anything.
func TestUpRefusesAMisspeltVariable(t *testing.T) {
	t.Setenv("AGENTMESH_LEASE_TLL", "3s")
	io, _, errOut := testIO(nil)
	code := run(context.Background(), []string{"up", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--http", ""}, io)
	want := "agentmesh: config: AGENTMESH_LEASE_TLL: unknown variable; nothing in this build reads it (did you mean AGENTMESH_LEASE_TTL?)\n"
	if code != exitUsage || errOut.String() != want {
		t.Fatalf("up: exit code %d, stderr %q; want %d, %q", code, errOut, exitUsage, want)
	}
}

// TestUpIgnoresClientCredentials: with the client commands' credential
// and TLS variables in its environment (a shared one), up still serves:
// its services connect to its own server without them.
func TestUpIgnoresClientCredentials(t *testing.T) {
	_, sec := natstest.RunSecure(t)
	t.Setenv("AGENTMESH_NATS_NKEY", sec.Seed)
	t.Setenv("AGENTMESH_NATS_TLS_CA", sec.CA)
	t.Setenv("AGENTMESH_NATS_TLS_CERT", sec.ClientCert)
	t.Setenv("AGENTMESH_NATS_TLS_KEY", sec.ClientKey)
	m := startUp(t, false)
	natstest.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(m.stderr.String(), "the NATS credential and TLS variables are left to the client commands") {
			return natstest.Errorf("no log line about the credentials yet")
		}
		return nil
	})
	if code, out, errOut := m.cli(context.Background(), "run", "-p", "fixture", "hi"); code != exitOK {
		t.Fatalf("run: exit code %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestClientCommandsRefuseAMisspeltVariable: a client command fails with
// exit code 2 on a misspelt variable (which would leave its flag at the
// default: the run in the default tenant), before it connects; offline
// commands too.
func TestClientCommandsRefuseAMisspeltVariable(t *testing.T) {
	for _, args := range [][]string{{"status", "r1"}, {"run", "-p", "fixture", "hi"}, {"profiles", "list", "--profiles-dir", "../../profiles"}} {
		env := map[string]string{"AGENTMESH_TENNANT": "acme", "AGENTMESH_NATS_URL": "nats://127.0.0.1:1", "ANTHROPIC_API_KEY": "k"}
		io, out, errOut := testIO(env)
		io.environ = func() []string { // as os.Environ gives it in main
			var kv []string
			for k, v := range env {
				kv = append(kv, k+"="+v)
			}
			return kv
		}
		code := run(context.Background(), args, io)
		want := "agentmesh: config: AGENTMESH_TENNANT: unknown variable; nothing in this build reads it (did you mean AGENTMESH_TENANT?)\n"
		if code != exitUsage || errOut.String() != want || out.String() != "" {
			t.Errorf("%v: exit code %d, stderr %q, stdout %q; want %d, %q", args, code, errOut, out, exitUsage, want)
		}
	}
}
