package service_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/servicetest"
	natsjwt "github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// with returns env with the changes in more ("" unsets).
func with(env map[string]string, more map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for k, v := range more {
		if v == "" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

// closedAfterHandshake is nats.go's error for a TLS connection the server
// closed once the handshake ended.
const closedAfterHandshake = "nats: tls error: connection closed by remote after TLS handshake"

// TestConnectSecure: a service connects to a server that requires TLS
// with a client certificate and an nkey only with all of it; each missing
// or wrong piece fails the connection with the server's or TLS's reason.
func TestConnectSecure(t *testing.T) {
	srv, sec := natstest.RunSecure(t)
	good := servicetest.SecureEnv(sec)
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // "" for a connection that works
		// orErr is another error text as good as wantErr: under TLS 1.3
		// the client finishes its handshake before the server checks the
		// client certificate, and the server's alert may come after the
		// client saw the connection close.
		orErr string
	}{
		{name: "all of it", env: good},
		{name: "tls:// URL", env: with(good, map[string]string{"AGENTMESH_NATS_URL": strings.Replace(srv.ClientURL(), "nats://", "tls://", 1)})},
		{name: "no nkey", env: with(good, map[string]string{"AGENTMESH_NATS_NKEY": ""}), wantErr: "Authorization Violation"},
		{name: "another user's seed", env: with(good, map[string]string{"AGENTMESH_NATS_NKEY": sec.StrangerSeed}), wantErr: "Authorization Violation"},
		{name: "no client certificate", env: with(good, map[string]string{"AGENTMESH_NATS_TLS_CERT": "", "AGENTMESH_NATS_TLS_KEY": ""}), wantErr: "remote error: tls: certificate required", orErr: closedAfterHandshake},
		{name: "certificate of another CA", env: with(good, map[string]string{"AGENTMESH_NATS_TLS_CERT": sec.StrangerCert, "AGENTMESH_NATS_TLS_KEY": sec.StrangerKey}), wantErr: "remote error: tls: unknown certificate authority", orErr: closedAfterHandshake},
		{name: "server not verified", env: with(good, map[string]string{"AGENTMESH_NATS_TLS_CA": ""}), wantErr: "certificate signed by unknown authority"},
		{name: "server name not overridden", env: with(good, map[string]string{"AGENTMESH_NATS_TLS_SERVER_NAME": ""}), wantErr: "x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"},
		{name: "no TLS", env: with(good, map[string]string{"AGENTMESH_NATS_TLS_CA": "", "AGENTMESH_NATS_TLS_CERT": "", "AGENTMESH_NATS_TLS_KEY": "", "AGENTMESH_NATS_TLS_SERVER_NAME": ""}), wantErr: "tls: failed to verify certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkConnect(t, srv.ClientURL(), tt.env, tt.wantErr, tt.orErr) })
	}
}

// checkConnect loads the common configuration from env with natsURL and
// connects with it (service.ConnectConfig): the connection must fail with
// an error holding wantErr or orErr, or, for wantErr "", be TLS and reach
// JetStream.
func checkConnect(t *testing.T, natsURL string, env map[string]string, wantErr, orErr string) {
	t.Helper()
	cfg := servicetest.LoadSpec[service.Config](t, natsURL, env)
	nc, js, err := service.ConnectConfig(cfg, "test", slog.New(slog.DiscardHandler))
	if wantErr != "" {
		if err == nil {
			nc.Close()
			t.Fatalf("ConnectConfig: connected, want an error holding %q", wantErr)
		}
		if !strings.Contains(err.Error(), wantErr) && (orErr == "" || !strings.Contains(err.Error(), orErr)) {
			t.Fatalf("ConnectConfig = %v, want an error holding %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("ConnectConfig: %v", err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream through the connection: %v", err)
	}
	if !nc.TLSRequired() {
		t.Fatal("connection is not TLS")
	}
}

// userCreds writes a .creds file of a new user signed by a new account and
// returns its path; expires 0 never expires.
func userCreds(t *testing.T, dir, name string, expires int64, seedOf nkeys.KeyPair) string {
	t.Helper()
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	claims := natsjwt.NewUserClaims(pub)
	claims.Expires = expires
	token, err := claims.Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	b, err := natsjwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	if seedOf != nil { // FormatUserConfig refuses a seed of another user
		otherSeed, _ := seedOf.Seed()
		b = []byte(strings.Replace(string(b), string(seed), string(otherSeed), 1))
	}
	return writeFile(t, dir, name, string(b))
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNATSAuthConfig: every bad credential or TLS file fails LoadConfig
// naming its variable, and no error shows a seed.
func TestNATSAuthConfig(t *testing.T) {
	_, sec := natstest.RunSecure(t)
	dir := t.TempDir()
	other, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	accountSeed, _ := account.Seed()
	creds := userCreds(t, dir, "good.creds", 0, nil)
	seed, err := os.ReadFile(sec.Seed)
	if err != nil {
		t.Fatal(err)
	}
	cases := []servicetest.ConfigCase{
		{Name: "none", Env: nil, Want: ""},
		{Name: "creds", Env: map[string]string{"AGENTMESH_NATS_CREDS": creds}, Want: ""},
		{Name: "nkey and TLS", Env: servicetest.SecureEnv(sec), Want: ""},
		{Name: "server name alone", Env: map[string]string{"AGENTMESH_NATS_TLS_SERVER_NAME": "nats.example"}, Want: ""},
		{Name: "creds missing", Env: map[string]string{"AGENTMESH_NATS_CREDS": filepath.Join(dir, "absent.creds")}, Want: "config: AGENTMESH_NATS_CREDS: read " + filepath.Join(dir, "absent.creds") + ": no such file or directory"},
		{Name: "creds a directory", Env: map[string]string{"AGENTMESH_NATS_CREDS": dir}, Want: "config: AGENTMESH_NATS_CREDS: read " + dir + ": is a directory"},
		{Name: "creds empty", Env: map[string]string{"AGENTMESH_NATS_CREDS": writeFile(t, dir, "empty.creds", "\n")}, Want: "config: AGENTMESH_NATS_CREDS: " + filepath.Join(dir, "empty.creds") + " is empty"},
		{Name: "creds only a seed", Env: map[string]string{"AGENTMESH_NATS_CREDS": sec.Seed}, Want: "AGENTMESH_NATS_CREDS: " + sec.Seed + " holds no user JWT"},
		{Name: "creds without seed", Env: map[string]string{"AGENTMESH_NATS_CREDS": writeFile(t, dir, "noseed.creds", "-----BEGIN NATS USER JWT-----\neyJhbGciOi\n------END NATS USER JWT------\n")}, Want: "AGENTMESH_NATS_CREDS: " + filepath.Join(dir, "noseed.creds") + " holds no user nkey seed"},
		{Name: "creds seed of another user", Env: map[string]string{"AGENTMESH_NATS_CREDS": userCreds(t, dir, "mismatch.creds", 0, other)}, Want: "the seed is not the key of the JWT's user"},
		{Name: "creds expired", Env: map[string]string{"AGENTMESH_NATS_CREDS": userCreds(t, dir, "expired.creds", time.Now().Add(-time.Hour).Unix(), nil)}, Want: "AGENTMESH_NATS_CREDS: " + filepath.Join(dir, "expired.creds") + ": the user JWT expired at"},
		{Name: "creds and nkey", Env: map[string]string{"AGENTMESH_NATS_CREDS": creds, "AGENTMESH_NATS_NKEY": sec.Seed}, Want: "config: AGENTMESH_NATS_CREDS: set together with AGENTMESH_NATS_NKEY"},
		{Name: "nkey with CRLF", Env: map[string]string{"AGENTMESH_NATS_NKEY": writeFile(t, dir, "crlf.nk", strings.TrimSpace(string(seed))+"\r\n")}, Want: ""},
		{Name: "nkey missing", Env: map[string]string{"AGENTMESH_NATS_NKEY": filepath.Join(dir, "absent.nk")}, Want: "config: AGENTMESH_NATS_NKEY: read " + filepath.Join(dir, "absent.nk") + ": no such file"},
		{Name: "nkey not a seed", Env: map[string]string{"AGENTMESH_NATS_NKEY": sec.CA}, Want: "config: AGENTMESH_NATS_NKEY: " + sec.CA + " holds no user nkey seed"},
		{Name: "nkey an account's seed", Env: map[string]string{"AGENTMESH_NATS_NKEY": writeFile(t, dir, "account.nk", string(accountSeed))}, Want: "AGENTMESH_NATS_NKEY: " + filepath.Join(dir, "account.nk") + " holds no user nkey seed"},
		{Name: "nkey corrupt", Env: map[string]string{"AGENTMESH_NATS_NKEY": writeFile(t, dir, "corrupt.nk", "SU"+strings.Repeat("A", 56))}, Want: "AGENTMESH_NATS_NKEY"},
		{Name: "CA missing", Env: map[string]string{"AGENTMESH_NATS_TLS_CA": filepath.Join(dir, "absent.pem")}, Want: "config: AGENTMESH_NATS_TLS_CA: read " + filepath.Join(dir, "absent.pem")},
		{Name: "CA not PEM", Env: map[string]string{"AGENTMESH_NATS_TLS_CA": sec.Seed}, Want: "config: AGENTMESH_NATS_TLS_CA: " + sec.Seed + " holds no PEM certificate"},
		{Name: "cert without key", Env: map[string]string{"AGENTMESH_NATS_TLS_CERT": sec.ClientCert}, Want: "config: AGENTMESH_NATS_TLS_KEY: must be set with AGENTMESH_NATS_TLS_CERT"},
		{Name: "key without cert", Env: map[string]string{"AGENTMESH_NATS_TLS_KEY": sec.ClientKey}, Want: "config: AGENTMESH_NATS_TLS_CERT: must be set with AGENTMESH_NATS_TLS_KEY"},
		{Name: "key of another certificate", Env: map[string]string{"AGENTMESH_NATS_TLS_CERT": sec.ClientCert, "AGENTMESH_NATS_TLS_KEY": sec.StrangerKey}, Want: "config: AGENTMESH_NATS_TLS_CERT: " + sec.ClientCert + " with key " + sec.StrangerKey + ": tls: private key does not match public key"},
		{Name: "cert missing", Env: map[string]string{"AGENTMESH_NATS_TLS_CERT": filepath.Join(dir, "absent.pem"), "AGENTMESH_NATS_TLS_KEY": sec.ClientKey}, Want: "config: AGENTMESH_NATS_TLS_CERT: read " + filepath.Join(dir, "absent.pem")},
		{Name: "key missing", Env: map[string]string{"AGENTMESH_NATS_TLS_CERT": sec.ClientCert, "AGENTMESH_NATS_TLS_KEY": filepath.Join(dir, "absent-key.pem")}, Want: "config: AGENTMESH_NATS_TLS_CERT: read " + filepath.Join(dir, "absent-key.pem")},
	}
	servicetest.CheckSpecs[service.Config](t, cases)

	// Every problem at once, none quoting a seed.
	t.Setenv("AGENTMESH_NATS_NKEY", sec.ClientKey)
	t.Setenv("AGENTMESH_NATS_TLS_CA", sec.Seed)
	t.Setenv("AGENTMESH_NATS_TLS_CERT", sec.ClientCert)
	var cfg service.Config
	err = service.LoadConfig(&cfg, &cfg)
	if !errors.Is(err, service.ErrConfig) || !strings.Contains(err.Error(), "AGENTMESH_NATS_NKEY") ||
		!strings.Contains(err.Error(), "AGENTMESH_NATS_TLS_CA") || !strings.Contains(err.Error(), "AGENTMESH_NATS_TLS_KEY") {
		t.Fatalf("LoadConfig = %v, want ErrConfig naming AGENTMESH_NATS_NKEY, _TLS_CA and _TLS_KEY", err)
	}
	if strings.Contains(err.Error(), strings.TrimSpace(string(seed))) {
		t.Fatalf("LoadConfig's error shows a seed: %v", err)
	}
}

// TestConnectOperator: on a server in operator (JWT) mode that also
// requires client certificates, a service connects with its .creds file
// and the TLS files, and not with a missing .creds file or one of an
// account the operator never signed.
func TestConnectOperator(t *testing.T) {
	srv, op := natstest.RunOperator(t)
	good := with(servicetest.SecureEnv(op.Secure), map[string]string{"AGENTMESH_NATS_NKEY": "", "AGENTMESH_NATS_CREDS": op.Creds})
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{name: "creds and TLS", env: good},
		{name: "no creds", env: with(good, map[string]string{"AGENTMESH_NATS_CREDS": ""}), wantErr: "Authorization Violation"},
		{name: "creds of an unknown account", env: with(good, map[string]string{"AGENTMESH_NATS_CREDS": op.StrangerCreds}), wantErr: "Authorization Violation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkConnect(t, srv.ClientURL(), tt.env, tt.wantErr, "") })
	}
}
