package redact

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const ghToken = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"

func mustNew(t testing.TB, rules ...Rule) *Redactor {
	t.Helper()
	rd, err := New(rules)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

func TestTenantRules(t *testing.T) {
	rd := mustNew(t,
		Rule{"acme_ticket", `ACME-[0-9]{6}`},
		Rule{"codename", `(?i)\b(falcon|osprey)\b`},
		Rule{"email", `[a-z0-9._]+@corp\.example\.com`},
	)
	tests := []struct {
		name string
		in   string
		want string
		fire []Fired
	}{
		{"literal prefix", "see ACME-123456 and ACME-12345", "see [REDACTED:acme_ticket] and ACME-12345",
			[]Fired{{"acme_ticket", 1}}},
		{"case folded words", "Project FALCON meets osprey; falconry stays", "Project [REDACTED:codename] meets [REDACTED:codename]; falconry stays",
			[]Fired{{"codename", 2}}},
		{"required literal in the middle", "mail jane.doe@corp.example.com or bob@example.com", "mail [REDACTED:email] or bob@example.com",
			[]Fired{{"email", 1}}},
		{"built-in and tenant", "ACME-000001 " + ghToken, "[REDACTED:acme_ticket] [REDACTED:builtin:github_token]",
			[]Fired{{"acme_ticket", 1}, {"builtin:github_token", 1}}},
		{"nothing", "plain text", "plain text", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := rd.Session()
			if got := s.String(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if got := s.Counts(); !slices.Equal(got, tt.fire) {
				t.Errorf("Counts() = %v, want %v", got, tt.fire)
			}
		})
	}
}

func TestOverlapsBecomeOneMarker(t *testing.T) {
	// The tenant rule's match overlaps the GitHub token: the union goes,
	// under the built-in's name (built-ins come first), counted once.
	rd := mustNew(t, Rule{"tok", `token=[a-z_]{4}`})
	s := rd.Session()
	got := s.String("token=" + ghToken + " end")
	if want := "[REDACTED:builtin:github_token] end"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := s.Counts(), []Fired{{"builtin:github_token", 1}}; !slices.Equal(got, want) {
		t.Errorf("Counts() = %v, want %v", got, want)
	}
	// A bearer token that is a JWT: the more specific name.
	s = rd.Session()
	got = s.String("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln")
	if want := "Authorization: Bearer [REDACTED:builtin:jwt]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStringDoesNotAllocateWithoutMatches(t *testing.T) {
	rd := mustNew(t, Rule{"acme", `ACME-[0-9]{6}`}, Rule{"ssn", `\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b`})
	s := rd.Session()
	in := strings.Repeat("ordinary prose with a task-list, https://example.com/x and no secrets. ", 100)
	if got := s.String(in); got != in {
		t.Fatal("changed text without secrets")
	}
	if n := testing.AllocsPerRun(20, func() { s.String(in) }); n != 0 {
		t.Errorf("String allocated %v times per call on text without matches", n)
	}
}

type label string

type opaque struct{ Secret string }

func TestValueTypes(t *testing.T) {
	rd := mustNew(t)
	s := rd.Session()
	marker := "[REDACTED:builtin:github_token]"
	when := time.Unix(1700000000, 0).UTC()
	in := map[string]any{
		"s":      ghToken,
		"bytes":  []byte(ghToken),
		"list":   []any{ghToken, 1, int64(2), uint8(3), 1.5, true, nil, json.Number("42")},
		"maps":   []map[string]any{{"k": ghToken}},
		"labels": map[string]string{"token": ghToken, ghToken: "v"},
		"argv":   []string{"--token", ghToken},
		"any":    map[any]any{"k": ghToken, 7: ghToken},
		"named":  label(ghToken),
		"typed":  []label{label(ghToken)},
		"ptr":    &[]string{ghToken},
		"time":   when,
		"struct": opaque{Secret: ghToken},
	}
	got := s.Value(in)
	want := map[string]any{
		"s":      marker,
		"bytes":  []byte(marker),
		"list":   []any{marker, 1, int64(2), uint8(3), 1.5, true, nil, json.Number("42")},
		"maps":   []map[string]any{{"k": marker}},
		"labels": map[string]string{"token": marker, marker: "v"},
		"argv":   []string{"--token", marker},
		"any":    map[any]any{"k": marker, 7: marker},
		"named":  label(marker),
		"typed":  []any{label(marker)},
		"ptr":    []any{marker},
		"time":   when,
		"struct": "[REDACTED:unsupported redact.opaque]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Value:\n got %#v\nwant %#v", got, want)
	}
	if got, want := s.Counts(), []Fired{{"builtin:github_token", 12}}; !slices.Equal(got, want) {
		t.Errorf("Counts() = %v, want %v", got, want)
	}
	if in["s"] != ghToken || string(in["bytes"].([]byte)) != ghToken {
		t.Error("Value changed its input")
	}
}

func TestValueKeyCollisions(t *testing.T) {
	rd := mustNew(t)
	other := "ghp_00000000000000000000000000000000000z"
	in := map[string]any{ghToken: 1, other: 2, "plain": 3}
	for range 5 { // the same map gives the same copy whatever the map order
		got := rd.Session().Value(in)
		want := map[string]any{
			"[REDACTED:builtin:github_token]":   2, // other sorts first
			"[REDACTED:builtin:github_token]#2": 1,
			"plain":                             3,
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestRedactorIsSafeForConcurrentUse(t *testing.T) {
	rd := mustNew(t, Rule{"acme", `ACME-[0-9]{6}`})
	in := "ACME-123456 " + ghToken
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			s := rd.Session()
			for range 100 {
				s.String(in)
			}
			if got, want := s.Counts(), []Fired{{"acme", 100}, {"builtin:github_token", 100}}; !slices.Equal(got, want) {
				t.Errorf("Counts() = %v, want %v", got, want)
			}
		})
	}
	wg.Wait()
}

// BenchmarkAdversarialInput feeds each detector a megabyte built to make
// a naive matcher rescan: a candidate at every few bytes, none of which
// completes. Its MB/s is of the same order as on ordinary text when the
// scan is linear (make bench), not seconds per megabyte.
func BenchmarkAdversarialInput(b *testing.B) {
	rd := mustNew(b, Rule{"acme", `ACME-[A-Z]+-[0-9]{2}`})
	const n = 1 << 20
	for _, unit := range []string{
		"eyJ", "eyJa.", "-----BEGIN RSA PRIVATE KEY-----", "x://a:", "a://:b", "sk-",
		"Bearer ", "secret_access_key=", "ghp_", "AKIA", "ACME-", "-----BEGIN PRIVATE KEY-----\n-----END ",
	} {
		in := strings.Repeat(unit, n/len(unit))
		b.Run(fmt.Sprintf("%.12q", unit), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				rd.Session().String(in)
			}
		})
	}
}
