package bench_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exporter/redact"
)

// redactCorpusSize is the size of the trajectory-like text that
// BenchmarkRedact redacts.
const redactCorpusSize = 1 << 20

// BenchmarkRedact reports redaction throughput (MB/s) over ~1 MiB of
// trajectory-like text with the built-ins and 0, 10 and 50 tenant rules,
// and, as the baseline in the same run, a plain copy of the same bytes
// (strings.Clone). One iteration redacts (or copies) the whole text with a
// fresh Session, as the exporter does per trajectory.
func BenchmarkRedact(b *testing.B) {
	text := redactCorpus(redactCorpusSize)
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			_ = strings.Clone(text)
		}
	})
	for _, n := range []int{0, 10, 50} {
		rd, err := redact.New(tenantRules(n))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			var fired int
			for b.Loop() {
				s := rd.Session()
				_ = s.String(text)
				fired = len(s.Counts())
			}
			b.ReportMetric(float64(fired), "rules-fired")
		})
	}
}

// TestRedactCorpus checks that the benchmark's text holds what it says: a
// secret of every built-in kind, and matches of some tenant rules but not
// all, and that redaction removes them.
func TestRedactCorpus(t *testing.T) {
	text := redactCorpus(redactCorpusSize)
	rd, err := redact.New(tenantRules(50))
	if err != nil {
		t.Fatal(err)
	}
	s := rd.Session()
	out := s.String(text)
	fired := map[string]bool{}
	for _, f := range s.Counts() {
		fired[f.Rule] = true
	}
	for _, name := range redact.BuiltinNames() {
		if !fired[name] {
			t.Errorf("built-in %s does not fire on the corpus", name)
		}
	}
	if n := len(fired) - len(redact.BuiltinNames()); n == 0 || n == 50 {
		t.Errorf("%d of 50 tenant rules fire; want some, not all", n)
	}
	if strings.Contains(out, corpusSecrets[0]) {
		t.Error("a secret survived")
	}
}

// corpusSecrets are placed once in each 64 KiB of the corpus.
var corpusSecrets = []string{
	"sk-proj-Zx81_kq-Q0a9VbNmPoIuYtRe3WsXcD5f6g7h8j9k0lMnBvCx",
	"sk-ant-api03-Qw3rTy-Ui0pAs_DfGh1jKlZxCvBnM2qW3eR4tY5uI6oP7aS8dF9gH0jK-AA",
	"AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
	"Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543.v2",
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
	"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBcdXq3Zp0mQv7yV9pQ2r1tK8Lw\n-----END EC PRIVATE KEY-----",
	"postgres://app:s3cr3t-P4ss@db.internal:5432/app",
	"AKIAIOSFODNN7EXAMPLE",
	"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	"ghp_16C7e42F292c6912E7710c838347Ae178B4a",
}

// corpusParts are the ordinary content of a trajectory: prose, code, a
// tool call and its JSON result, a shell transcript with URLs, near misses
// of the built-ins (task-list, ssh://git@..., "bearer of"), and text that a
// few tenant rules match.
var corpusParts = []string{
	"I'll start by reading the router package to see how submissions are validated, then run the failing test again. " +
		"The bearer of the lease renews it every ten seconds; the task-list is kept per tenant and the risk-score is advisory.\n",
	"```go\nfunc (r *Router) handle(ctx context.Context, msg jetstream.Msg) error {\n\treq, err := wire.Decode[wire.RunRequest](msg.Data())\n" +
		"\tif err != nil {\n\t\treturn fmt.Errorf(\"decode run request: %w\", err)\n\t}\n\treturn r.route(ctx, req)\n}\n```\n",
	`{"type":"tool_use","id":"toolu_01","name":"bash","input":{"command":"curl -s https://api.example.com/v1/items?page=2 | jq '.items[] | .id'"}}` + "\n",
	`{"type":"tool_result","tool_use_id":"toolu_01","content":"[{\"id\":\"it_8812\",\"owner\":\"jane.doe@corp.example.com\",\"ticket\":\"ACME-004211\"},{\"id\":\"it_8813\",\"url\":\"https://docs.example.com/guide#setup\"}]"}` + "\n",
	"$ git clone ssh://git@github.com/agentmesh/agentmesh.git && cd agentmesh && go test ./pkg/...\nok  \tgithub.com/agentmesh/agentmesh/pkg/wire\t0.412s\n",
	"stderr: warning: the config at /etc/app/config.yaml sets log_level=debug; see http://localhost:8080/debug/pprof/ for profiles\n",
	"The highest throughput came from batching 256 messages; eyeballing the graph, the knee is near 4 KiB payloads. Ticket PROJ0042-QA tracks it.\n",
}

// redactCorpus returns about size bytes of trajectory-like text, the same
// for the same size.
func redactCorpus(size int) string {
	var b strings.Builder
	b.Grow(size + 4096)
	for i := 0; b.Len() < size; i++ {
		b.WriteString(corpusParts[i%len(corpusParts)])
		if i%150 == 149 { // about one secret every 40 KiB
			fmt.Fprintf(&b, "config dump: %s\n", corpusSecrets[(i/150)%len(corpusSecrets)])
		}
	}
	return b.String()
}

// tenantRules returns n realistic tenant rules: internal ticket and project
// ids, hostnames, e-mail domains, code names and national-id shapes. The
// first ten match the corpus (some of them do); the others are the same
// shapes for other numbers, as a tenant with many teams would write them.
func tenantRules(n int) []redact.Rule {
	shapes := []string{
		`ACME-[0-9]{6}`,
		`PROJ[0-9]{4}-[A-Z]{2}`,
		`[a-z0-9._]+@corp\.example\.com`,
		`\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b`,
		`(?i)\bcodename-falcon\b`,
		`INC[0-9]{7}`,
		`[a-z]+\.int\.example\.net`,
		`EMP-[0-9]{5}`,
		`\bDE[0-9]{20}\b`,
		`cust_[a-z0-9]{14}`,
	}
	numbered := []string{
		`ACME%d-[0-9]{6}`,
		`PROJ%d[0-9]{3}-[A-Z]{2}`,
		`[a-z0-9._]+@corp%d\.example\.com`,
		`\b%d[0-9]{2}-[0-9]{2}-[0-9]{4}\b`,
		`(?i)\bcodename-%d\b`,
		`INC%d[0-9]{5}`,
		`[a-z]+\.int%d\.example\.net`,
		`EMP-%d[0-9]{4}`,
		`\bDE%d[0-9]{18}\b`,
		`cust_%d[a-z0-9]{12}`,
	}
	rules := make([]redact.Rule, n)
	for i := range rules {
		p := shapes[i%len(shapes)]
		if i >= len(shapes) {
			p = fmt.Sprintf(numbered[i%len(numbered)], i)
		}
		rules[i] = redact.Rule{Name: fmt.Sprintf("rule%02d", i), Pattern: p}
	}
	return rules
}
