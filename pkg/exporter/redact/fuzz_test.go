package redact

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// seedDir holds the redaction seeds. Go reads a fuzz target's own corpus
// only from pkg/exporter/redact/testdata/fuzz/<Target>/; ours lives at the top of the
// repository with the other fixtures and is added with f.Add:
// patterns.txt (one expression a line, accepted and refused) and text-*.txt
// (trajectory-like text with secrets and near misses).
var seedDir = filepath.Join("..", "..", "..", "testdata", "fuzz", "redact")

func seedPatterns(f *testing.F) []string {
	f.Helper()
	b, err := os.ReadFile(filepath.Join(seedDir, "patterns.txt"))
	if err != nil {
		f.Fatalf("read seeds: %v", err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if len(out) == 0 {
		f.Fatalf("no patterns in %s", seedDir)
	}
	return out
}

func seedTexts(f *testing.F) []string {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join(seedDir, "text-*.txt"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no text seeds in %s (%v)", seedDir, err)
	}
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// FuzzValidate: Validate never panics and refuses with a *RuleError; an
// accepted rule compiles into a Redactor, and redacting text with it
// terminates, is deterministic, and counts whenever it changes the text.
func FuzzValidate(f *testing.F) {
	texts := seedTexts(f)
	for i, p := range seedPatterns(f) {
		f.Add(p, texts[i%len(texts)])
	}
	f.Fuzz(func(t *testing.T, pattern, text string) {
		err := Validate(Rule{Name: "r", Pattern: pattern})
		if err != nil {
			var re *RuleError
			if !errors.Is(err, ErrInvalidRule) || !errors.As(err, &re) || re.Reason == "" {
				t.Fatalf("Validate(%q) = %v, want a *RuleError with a reason", pattern, err)
			}
			return
		}
		rd, err := New([]Rule{{Name: "r", Pattern: pattern}})
		if err != nil {
			t.Fatalf("Validate accepted %q, New refused it: %v", pattern, err)
		}
		checkTenantFind(t, pattern, text)
		s := rd.Session()
		out := s.String(text)
		if out != text && len(s.Counts()) == 0 { // (a match can equal its marker: fired, unchanged)
			t.Fatalf("the text changed, yet nothing was counted")
		}
		if again := rd.Session().String(text); again != out {
			t.Fatalf("the same text redacted twice gave %q and %q", out, again)
		}
	})
}

// secretKinds build one seeded secret of each built-in kind from fuzz bytes:
// the text to place, and the part of it that must not survive.
var secretKinds = []func(b []byte) (text, secret string){
	func(b []byte) (string, string) { k := "sk-" + gen(b, alnumS, 48); return k, k },
	func(b []byte) (string, string) { k := "sk-proj-" + gen(b, keyS, 64); return k, k },
	func(b []byte) (string, string) { k := "sk-svcacct-" + gen(b, keyS, 40); return k, k },
	func(b []byte) (string, string) { k := "sk-ant-api03-" + gen(b, keyS, 80); return k, k },
	func(b []byte) (string, string) { k := "AIza" + gen(b, keyS, 35); return k, k },
	func(b []byte) (string, string) {
		k := gen(b, alnumS, 30) + "Z9"
		return "Authorization: Bearer " + k, k
	},
	func(b []byte) (string, string) {
		k := "eyJ" + gen(b, keyS, 20) + "." + gen(b[min(1, len(b)):], keyS, 40) + "." + gen(b, keyS, 24)
		return k, k
	},
	func(b []byte) (string, string) {
		body := gen(b, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 64)
		return "-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----", body
	},
	func(b []byte) (string, string) {
		ui := gen(b, alnumS, 8) + ":" + gen(b, alnumS, 20)
		return "postgres://" + ui + "@db.example.com:5432/app", ui
	},
	func(b []byte) (string, string) {
		k := "AKIA" + gen(b, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
		return k, k
	},
	func(b []byte) (string, string) {
		k := gen(b, alnumS+"/+", 40)
		return "aws_secret_access_key = " + k, k
	},
	func(b []byte) (string, string) { k := "ghp_" + gen(b, alnumS, 36); return k, k },
	func(b []byte) (string, string) { k := "github_pat_" + gen(b, alnumS+"_", 82); return k, k },
}

const (
	alnumS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	keyS   = alnumS + "_-"
)

// gen returns n characters of alphabet chosen by b (cycled), mixed with the
// position so that an empty b still gives varied text.
func gen(b []byte, alphabet string, n int) string {
	out := make([]byte, n)
	for i := range out {
		x := i * 7
		if len(b) > 0 {
			x += int(b[i%len(b)]) + i/len(b)
		}
		out[i] = alphabet[x%len(alphabet)]
	}
	return string(out)
}

// FuzzRedact: a seeded secret of any built-in kind, placed between
// arbitrary text, never survives redaction, whatever tenant rules overlap
// it.
func FuzzRedact(f *testing.F) {
	for i, text := range seedTexts(f) {
		half := len(text) / 2
		for k := range secretKinds {
			f.Add(uint8(k), []byte(text[:min(len(text), 16)]), text[:half], text[half:], uint8(i))
		}
	}
	f.Add(uint8(5), []byte("Bearer"), "Bearer", "Bearer", uint8(0))
	f.Add(uint8(7), []byte{}, "-----BEGIN EC PRIVATE KEY-----\n", "-----END ", uint8(1))
	rules := [][]Rule{
		nil,
		{{Name: "short", Pattern: `[a-z]{3}`}},
		{{Name: "sk", Pattern: `sk-[a-z]{2}`}, {Name: "eq", Pattern: `= [A-Za-z]`}, {Name: "host", Pattern: `@db\.example`}},
	}
	rds := make([]*Redactor, len(rules))
	for i, r := range rules {
		rd, err := New(r)
		if err != nil {
			f.Fatal(err)
		}
		rds[i] = rd
	}
	f.Fuzz(func(t *testing.T, kind uint8, seed []byte, prefix, suffix string, ruleSet uint8) {
		text, secret := secretKinds[int(kind)%len(secretKinds)](seed)
		if strings.Contains(prefix, secret) || strings.Contains(suffix, secret) {
			return // the same characters elsewhere are not the seeded secret
		}
		in := prefix + " " + text + " " + suffix
		s := rds[int(ruleSet)%len(rds)].Session()
		out := s.String(in)
		if strings.Contains(out, secret) {
			t.Fatalf("secret %q survived:\n in %q\nout %q", secret, in, out)
		}
		if len(s.Counts()) == 0 {
			t.Fatalf("a secret was removed but nothing was counted")
		}
		v := s.Value(map[string]any{"k": []any{in}, in: 1})
		m := v.(map[string]any)
		for k := range m {
			if strings.Contains(k, secret) {
				t.Fatalf("secret survived in a key: %q", k)
			}
		}
		if got := m["k"].([]any)[0].(string); strings.Contains(got, secret) {
			t.Fatalf("secret survived in a value: %q", got)
		}
	})
}

// checkTenantFind fails unless the rule's prefiltered search finds exactly
// what the regexp finds on the whole text.
func checkTenantFind(t *testing.T, pattern, text string) {
	t.Helper()
	tree, reason := parsePattern(pattern)
	if reason != "" {
		t.Fatalf("parsePattern(%q): %s", pattern, reason)
	}
	tr := compileTenant(pattern, tree)
	var got [][]int
	for _, sp := range tr.find(text, 0, nil) {
		got = append(got, []int{sp.lo, sp.hi})
	}
	want := tr.re.FindAllStringIndex(text, -1)
	if !slices.EqualFunc(got, want, slices.Equal[[]int]) {
		t.Fatalf("pattern %q (req %q fold %v segments %v) on %q:\n got %v\nwant %v", pattern, tr.req, tr.fold, tr.seps != nil, text, got, want)
	}
}
