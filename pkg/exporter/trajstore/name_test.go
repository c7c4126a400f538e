package trajstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exporter/trajstore"
	"github.com/agentmesh/agentmesh/pkg/subject"
)

var sha = strings.Repeat("0f", 32)

func TestName(t *testing.T) {
	tests := []struct {
		name             string
		tenant, run, sha string
		want             string
		wantField        string
		wantInvalidToken bool
	}{
		{name: "valid", tenant: "acme", run: "run_01-X", sha: sha, want: "acme/run_01-X/" + sha + ".json"},
		{name: "longest tokens", tenant: strings.Repeat("t", 64), run: strings.Repeat("r", 64), sha: sha,
			want: strings.Repeat("t", 64) + "/" + strings.Repeat("r", 64) + "/" + sha + ".json"},
		{name: "empty tenant", tenant: "", run: "r", sha: sha, wantField: "tenant", wantInvalidToken: true},
		{name: "dotted tenant", tenant: "..", run: "r", sha: sha, wantField: "tenant", wantInvalidToken: true},
		{name: "slash in run", tenant: "t", run: "a/b", sha: sha, wantField: "run_id", wantInvalidToken: true},
		{name: "long run", tenant: "t", run: strings.Repeat("r", 65), sha: sha, wantField: "run_id", wantInvalidToken: true},
		{name: "upper hex", tenant: "t", run: "r", sha: strings.ToUpper(sha), wantField: "sha256"},
		{name: "short sha", tenant: "t", run: "r", sha: sha[:10], wantField: "sha256"},
		{name: "sha with extension", tenant: "t", run: "r", sha: sha[:59] + ".json", wantField: "sha256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := trajstore.Name(tt.tenant, tt.run, tt.sha)
			if tt.wantField == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Name = %q, %v; want %q", got, err, tt.want)
				}
				te, re, se, err := trajstore.ParseName(got)
				if err != nil || te != tt.tenant || re != tt.run || se != tt.sha {
					t.Fatalf("ParseName(%q) = %q, %q, %q, %v", got, te, re, se, err)
				}
				return
			}
			var ne *trajstore.NameError
			if !errors.Is(err, trajstore.ErrInvalidName) || !errors.As(err, &ne) {
				t.Fatalf("Name = %q, %v; want a *NameError", got, err)
			}
			if ne.Field != tt.wantField || errors.Is(err, subject.ErrInvalidToken) != tt.wantInvalidToken {
				t.Errorf("error %v: field %q, want %q; invalid token %t, want %t", err, ne.Field, tt.wantField, errors.Is(err, subject.ErrInvalidToken), tt.wantInvalidToken)
			}
		})
	}
}

func TestParseNameNamesWhatIsWrong(t *testing.T) {
	tests := []struct {
		in        string
		wantField string
	}{
		{"a/b", "name"},
		{"a/b/c/d.json", "name"},
		{"a/b/" + sha + ".JSON", "name"},
		{"a/../" + sha + ".json", "run_id"},
		{"/b/" + sha + ".json", "tenant"},
		{"a/b/" + sha + sha + ".json", "sha256"},
	}
	for _, tt := range tests {
		_, _, _, err := trajstore.ParseName(tt.in)
		var ne *trajstore.NameError
		if !errors.As(err, &ne) || ne.Field != tt.wantField || ne.Name != tt.in {
			t.Errorf("ParseName(%q) = %v; want a *NameError for %s naming the name", tt.in, err, tt.wantField)
		}
	}
}

func TestNameFor(t *testing.T) {
	// sha256("abc"), FIPS 180-2.
	const want = "tenant-1/run-1/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad.json"
	if got, err := trajstore.NameFor("tenant-1", "run-1", []byte("abc")); err != nil || got != want {
		t.Fatalf("NameFor = %q, %v; want %q", got, err, want)
	}
}

// Whatever ParseName accepts, Name rebuilds exactly, and it holds no
// element that leaves a directory.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{"t/r/" + sha + ".json", "../r/" + sha + ".json", "t/r/" + sha, "t//" + sha + ".json", "", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		te, re, se, err := trajstore.ParseName(name)
		if err != nil {
			if !errors.Is(err, trajstore.ErrInvalidName) {
				t.Fatalf("ParseName(%q) = %v, not ErrInvalidName", name, err)
			}
			return
		}
		back, err := trajstore.Name(te, re, se)
		if err != nil || back != name {
			t.Fatalf("Name(ParseName(%q)) = %q, %v", name, back, err)
		}
		for _, elem := range strings.Split(name, "/") {
			if elem == "" || elem == "." || elem == ".." || strings.ContainsAny(elem, "\\\x00") {
				t.Fatalf("ParseName accepted %q with element %q", name, elem)
			}
		}
	})
}
