package service_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/nats-io/nats-server/v2/server"
)

func TestRedactURL(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "no credentials", in: "nats://127.0.0.1:4222", want: "nats://127.0.0.1:4222"},
		{name: "no scheme", in: "127.0.0.1:4222", want: "127.0.0.1:4222"},
		{name: "empty", in: "", want: ""},
		{name: "user and password", in: "nats://u:p@a:4222", want: "nats://[REDACTED]@a:4222"},
		{name: "token without user", in: "nats://s3cret-token@host", want: "nats://[REDACTED]@host"},
		{name: "user and password without scheme", in: "u:p@host:4222", want: "[REDACTED]@host:4222"},
		{name: "every URL of a list", in: "nats://u:p@a:4222,nats://u:p2@b:4222", want: "nats://[REDACTED]@a:4222,nats://[REDACTED]@b:4222"},
		{name: "the deploy/k8s shape", in: "nats://router:pw0@nats-0.nats:4222,nats://router:pw1@nats-1.nats:4222,nats://router:pw2@nats-2.nats:4222",
			want: "nats://[REDACTED]@nats-0.nats:4222,nats://[REDACTED]@nats-1.nats:4222,nats://[REDACTED]@nats-2.nats:4222"},
		{name: "list with spaces", in: "nats://u:p@a:4222, nats://u:p2@b:4222", want: "nats://[REDACTED]@a:4222, nats://[REDACTED]@b:4222"},
		{name: "mixed list", in: "nats://a:4222,tls://tok@b:4222,ws://c:8080", want: "nats://a:4222,tls://[REDACTED]@b:4222,ws://c:8080"},
		{name: "IPv6 with credentials", in: "nats://u:p@[::1]:4222", want: "nats://[REDACTED]@[::1]:4222"},
		{name: "IPv6 without credentials", in: "nats://[fe80::1%25eth0]:4222,nats://[::1]:4222", want: "nats://[fe80::1%25eth0]:4222,nats://[::1]:4222"},
		{name: "IPv6 token in a list", in: "nats://[::1]:4222,nats://tok@[2001:db8::7]:4222", want: "nats://[::1]:4222,nats://[REDACTED]@[2001:db8::7]:4222"},
		{name: "password holding @ / and :", in: "nats://u:p@ss/w:rd@a:4222", want: "nats://[REDACTED]@a:4222"},
		{name: "percent-encoded password", in: "nats://u:p%40ss@a:4222", want: "nats://[REDACTED]@a:4222"},
		{name: "unparsable URL", in: "nats://u:secret@[::1", want: "nats://[REDACTED]@[::1"},
		{name: "empty userinfo", in: "nats://@a:4222", want: "nats://[REDACTED]@a:4222"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := service.RedactURL(tt.in); got != tt.want {
				t.Fatalf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactError(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		name, urls string
		in         error
		want       string
	}{
		{name: "nil", urls: "nats://u:p@a", in: nil, want: ""},
		{name: "URL quoted", urls: "nats://u:pw1@a:1,nats://u:pw2@[::1",
			in: fmt.Errorf(`parse "nats://u:pw2@[::1": missing ']' in host: %w`, cause), want: `parse "nats://[REDACTED]@[::1": missing ']' in host: cause`},
		{name: "password alone", urls: "nats://u:hunter22@a:1", in: fmt.Errorf("auth hunter22 refused: %w", cause), want: "auth [REDACTED] refused: cause"},
		{name: "token", urls: "nats://tok-9f3a@a:1", in: fmt.Errorf("bad tok-9f3a: %w", cause), want: "bad [REDACTED]: cause"},
		{name: "no credentials", urls: "nats://a:1", in: fmt.Errorf("nats: no servers available for connection: %w", cause), want: "nats: no servers available for connection: cause"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := service.RedactError(tt.urls, tt.in)
			if tt.in == nil {
				if err != nil {
					t.Fatalf("RedactError(nil) = %v", err)
				}
				return
			}
			if err.Error() != tt.want || !errors.Is(err, cause) {
				t.Fatalf("RedactError = %q (wraps the cause: %t), want %q wrapping it", err, errors.Is(err, cause), tt.want)
			}
		})
	}
}

// TestConnectShowsNoCredential: neither Connect's error for a list it
// cannot parse nor the connected URL shows a password or a token.
func TestConnectShowsNoCredential(t *testing.T) {
	const pw, token = "pw-DO-NOT-LEAK-1", "tok-DO-NOT-LEAK-2"
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, _, err := service.Connect("nats://u:"+pw+"@127.0.0.1:1,nats://u:"+pw+"x@[::1", "test", log)
	if err == nil || strings.Contains(err.Error(), "DO-NOT-LEAK") || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Fatalf("Connect = %v, want an error with every credential masked", err)
	}

	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, Authorization: token, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	url := strings.Replace(s.ClientURL(), "nats://", "nats://"+token+"@", 1)
	nc, _, err := service.Connect(url, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// nats.go's own ConnectedUrlRedacted masks only a password, so it
	// would log the token.
	if got := service.ConnectedURL(nc); strings.Contains(got, "DO-NOT-LEAK") || got != service.RedactURL(url) {
		t.Fatalf("ConnectedURL = %q, want %q", got, service.RedactURL(url))
	}
}
