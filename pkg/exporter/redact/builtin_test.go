package redact

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// Seeded secrets of each built-in kind, in the public formats. None is a
// live credential.
var seeds = []struct {
	rule string
	in   string // text holding the secret
	want string // what redaction leaves of in
}{
	{"builtin:openai_api_key", "OPENAI_API_KEY=sk-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6l",
		"OPENAI_API_KEY=[REDACTED:builtin:openai_api_key]"},
	{"builtin:openai_api_key", `{"key": "sk-proj-Zx81_kq-Q0a9VbNmPoIuYtRe3WsXcD5f6g7h8j9k0lMnBvCx"}`,
		`{"key": "[REDACTED:builtin:openai_api_key]"}`},
	{"builtin:openai_api_key", "use sk-svcacct-Q1w2E3r4T5y6U7i8O9p0AaSsDdFfGgHh now",
		"use [REDACTED:builtin:openai_api_key] now"},
	{"builtin:anthropic_api_key", "x-api-key: sk-ant-api03-Qw3rTy-Ui0pAs_DfGh1jKlZxCvBnM2qW3eR4tY5uI6oP7aS8dF9gH0jK-AA",
		"x-api-key: [REDACTED:builtin:anthropic_api_key]"},
	{"builtin:google_api_key", "https://maps.example.com/api?key=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY&x=1",
		"https://maps.example.com/api?key=[REDACTED:builtin:google_api_key]&x=1"},
	{"builtin:bearer_token", "Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543.v2",
		"Authorization: Bearer [REDACTED:builtin:bearer_token]"},
	{"builtin:bearer_token", `curl -H "authorization: bearer AbCdEfGhIjKlMnOpQrStUvWx=="`,
		`curl -H "authorization: bearer [REDACTED:builtin:bearer_token]"`},
	{"builtin:jwt", "token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c.",
		"token [REDACTED:builtin:jwt]."},
	{"builtin:jwt", "unsigned eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9. done",
		"unsigned [REDACTED:builtin:jwt] done"},
	{"builtin:pem_private_key", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nZ1BjP5CE8Wm0d+Zq3f5r\n-----END RSA PRIVATE KEY-----\nthanks",
		"key:\n[REDACTED:builtin:pem_private_key]\nthanks"},
	{"builtin:pem_private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
		"[REDACTED:builtin:pem_private_key]"},
	{"builtin:pem_private_key", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBcd\n-----END EC PRIVATE KEY-----",
		"[REDACTED:builtin:pem_private_key]"},
	{"builtin:pem_private_key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0w\n-----END ENCRYPTED PRIVATE KEY-----",
		"[REDACTED:builtin:pem_private_key]"},
	{"builtin:pem_private_key", "-----BEGIN PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,5E1B\n\nMIIEvQIBADANBgkq\n-----END PRIVATE KEY-----",
		"[REDACTED:builtin:pem_private_key]"},
	{"builtin:pem_private_key", "stderr: -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAM", // truncated tail
		"stderr: [REDACTED:builtin:pem_private_key]"},
	{"builtin:url_credentials", "DATABASE_URL=postgres://app:s3cr3t-P4ss@db.internal:5432/app",
		"DATABASE_URL=postgres://[REDACTED:builtin:url_credentials]@db.internal:5432/app"},
	{"builtin:url_credentials", "redis://:hunter2@cache:6379/0",
		"redis://[REDACTED:builtin:url_credentials]@cache:6379/0"},
	{"builtin:url_credentials", "git clone https://bob:p@ss:w0rd@git.example.com/repo.git",
		"git clone https://[REDACTED:builtin:url_credentials]@git.example.com/repo.git"},
	{"builtin:aws_access_key_id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
		"aws_access_key_id = [REDACTED:builtin:aws_access_key_id]"},
	{"builtin:aws_access_key_id", `"AccessKeyId": "ASIAY34FZKBOKMUTVV7A"`,
		`"AccessKeyId": "[REDACTED:builtin:aws_access_key_id]"`},
	{"builtin:aws_secret_access_key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"aws_secret_access_key = [REDACTED:builtin:aws_secret_access_key]"},
	{"builtin:aws_secret_access_key", "export AWS_SECRET_ACCESS_KEY=je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
		"export AWS_SECRET_ACCESS_KEY=[REDACTED:builtin:aws_secret_access_key]"},
	{"builtin:aws_secret_access_key", `{"SecretAccessKey": "9drTJvcXLB89EXAMPLELB8923FB892xMFI+kkAAA"}`,
		`{"SecretAccessKey": "[REDACTED:builtin:aws_secret_access_key]"}`},
	{"builtin:github_token", "GITHUB_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a",
		"GITHUB_TOKEN=[REDACTED:builtin:github_token]"},
	{"builtin:github_token", "gho_16C7e42F292c6912E7710c838347Ae178B4a ghu_16C7e42F292c6912E7710c838347Ae178B4a",
		"[REDACTED:builtin:github_token] [REDACTED:builtin:github_token]"},
	{"builtin:github_token", "ghs_16C7e42F292c6912E7710c838347Ae178B4a,ghr_16C7e42F292c6912E7710c838347Ae178B4a",
		"[REDACTED:builtin:github_token],[REDACTED:builtin:github_token]"},
	{"builtin:github_token", "github_pat_11ABCDEFG0123456789abc_defghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab",
		"[REDACTED:builtin:github_token]"},
}

func TestBuiltinDetectors(t *testing.T) {
	rd, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range seeds {
		t.Run(tt.rule, func(t *testing.T) {
			n := strings.Count(tt.want, "[REDACTED:"+tt.rule+"]")
			s := rd.Session()
			if got := s.String(tt.in); got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if got, want := s.Counts(), []Fired{{tt.rule, n}}; !slices.Equal(got, want) {
				t.Errorf("Counts() = %v, want %v", got, want)
			}

			// The same secret deep in a decoded tree, as a value and as a key.
			var tree any
			doc, _ := json.Marshal(map[string]any{
				"request": map[string]any{"messages": []any{map[string]any{"content": tt.in}}},
				"chunks":  []any{map[string]any{"tool_output": []any{1.5, true, nil, tt.in}}},
				tt.in:     "as a key",
			})
			if err := json.Unmarshal(doc, &tree); err != nil {
				t.Fatal(err)
			}
			s = rd.Session()
			out, _ := json.Marshal(s.Value(tree))
			if secret := secretOf(tt.in, tt.want); strings.Contains(string(out), secret) {
				t.Errorf("Value left %q in %s", secret, out)
			}
			if got, want := s.Counts(), []Fired{{tt.rule, 3 * n}}; !slices.Equal(got, want) {
				t.Errorf("Value counts = %v, want %v", got, want)
			}
		})
	}
}

// secretOf returns a part of in that redaction must remove: the longest
// stretch of in that is not in want.
func secretOf(in, want string) string {
	// want is in with secrets replaced; strip the common prefix and suffix.
	i := 0
	for i < len(in) && i < len(want) && in[i] == want[i] {
		i++
	}
	j := 0
	for j < len(in)-i && j < len(want)-i && in[len(in)-1-j] == want[len(want)-1-j] {
		j++
	}
	return in[i : len(in)-j]
}

func TestBuiltinLeavesOrdinaryText(t *testing.T) {
	rd, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		"The task-management service stores a risk-score for each desk-booking.",
		"pip install scikit-learn; sk-learn is not a package; ask-me-anything",
		"the sk-short key is too short to be one",
		"See https://example.com/docs?id=7 and ssh://git@github.com:org/repo.git",
		"http://[::1]:8080/health and https://host:8443/p@th and mailto:bob@example.com",
		"The bearer of this letter; bearer authentication is described in RFC 6750.",
		"Authorization: Bearer <token>",
		"The keys of a JSON object: eyJ is what '{\"' encodes to; eyJhbGciOiJIUzI1NiJ9 alone is a header.",
		"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
		"-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYI\n-----END PUBLIC KEY-----",
		"ASIAPACIFICCOUNCILMEMBERSHIPS and AKIA alone, AKIA123",
		"the highest ghp is 3; github_pat_ is a prefix; gho_short",
		"AIzaShort and the secret_access_key is set in the console",
		"go test -run TestX ./pkg/... && echo done",
		"",
	} {
		s := rd.Session()
		if got := s.String(in); got != in {
			t.Errorf("String(%q) = %q, want it unchanged", in, got)
		}
		if c := s.Counts(); len(c) != 0 {
			t.Errorf("Counts() = %v for ordinary text %q", c, in)
		}
	}
}

func TestAnthropicKeyIsNotOpenAI(t *testing.T) {
	rd, _ := New(nil)
	s := rd.Session()
	s.String("sk-ant-admin01-abcdefghijklmnopqrstuvwxyz012345 sk-ant-oat01-ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	want := []Fired{{"builtin:anthropic_api_key", 2}}
	if got := s.Counts(); !slices.Equal(got, want) {
		t.Errorf("Counts() = %v, want %v", got, want)
	}
}

func TestBuiltinNames(t *testing.T) {
	names := BuiltinNames()
	if len(names) != 10 {
		t.Fatalf("got %d built-ins, want 10: %v", len(names), names)
	}
	for _, seed := range seeds {
		if !slices.Contains(names, seed.rule) {
			t.Errorf("seed rule %q is not a built-in", seed.rule)
		}
	}
	for _, n := range names {
		if !strings.HasPrefix(n, BuiltinPrefix) {
			t.Errorf("built-in %q lacks the %q prefix", n, BuiltinPrefix)
		}
		if !slices.ContainsFunc(seeds, func(s struct{ rule, in, want string }) bool { return s.rule == n }) {
			t.Errorf("built-in %q has no seeded secret", n)
		}
	}
	names[0] = "changed"
	if BuiltinNames()[0] == "changed" {
		t.Error("BuiltinNames returns a shared slice")
	}
}
