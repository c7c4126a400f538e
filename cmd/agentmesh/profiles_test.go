package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
)

// shippedProfiles is the repository's profiles directory.
const shippedProfiles = "../../profiles"

func loadShipped(t *testing.T) *profile.Registry {
	t.Helper()
	reg, err := profile.Load(shippedProfiles)
	if err != nil {
		t.Fatalf("load the shipped profiles: %v", err)
	}
	return reg
}

// cliRun runs agentmesh with args in the environment env.
func cliRun(env map[string]string, args ...string) (code int, stdout, stderr string) {
	io, out, errOut := testIO(env)
	code = run(context.Background(), args, io)
	return code, out.String(), errOut.String()
}

// shownRows reads the key/value rows of agentmesh profiles show.
func shownRows(out string) map[string]string {
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			rows[k] = strings.TrimSpace(v)
		}
	}
	return rows
}

// shownPin reads the pin back from the text of agentmesh profiles show.
func shownPin(out string) wire.Pin {
	rows := shownRows(out)
	pin := wire.Pin{
		Provider:        rows["pin.provider"],
		Model:           rows["pin.model"],
		ProfileHash:     rows["pin.profile_hash"],
		RegistryVersion: rows["pin.registry_version"],
	}
	for k, v := range rows {
		if class, ok := strings.CutPrefix(k, "pin.pricing."); ok {
			if pin.Pricing == nil {
				pin.Pricing = map[string]string{}
			}
			pin.Pricing[class] = v
		}
	}
	return pin
}

// samePin compares pins, a nil pricing equal to an empty one.
func samePin(a, b wire.Pin) bool {
	if len(a.Pricing) == 0 && len(b.Pricing) == 0 {
		a.Pricing, b.Pricing = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// showJSON is the output of agentmesh profiles show --json.
type showJSON struct {
	Query      string         `json:"query"`
	ResolvedBy string         `json:"resolved_by"`
	Profile    map[string]any `json:"profile"`
	Available  *bool          `json:"available"`
	Pin        wire.Pin       `json:"pin"`
}

func TestProfilesShowEveryPin(t *testing.T) {
	reg := loadShipped(t)
	if len(reg.Names()) == 0 {
		t.Fatal("no shipped profiles")
	}
	for _, name := range reg.Names() {
		_, want, err := reg.Resolve(name)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", name, err)
		}
		if want.ProfileHash == "" || want.RegistryVersion != name+":"+reg.Version() {
			t.Fatalf("Resolve(%q) pin = %+v: no hash or registry version", name, want)
		}
		t.Run(name+"/text", func(t *testing.T) {
			code, out, errOut := cliRun(nil, "profiles", "show", "--profiles-dir", shippedProfiles, name)
			if code != exitOK {
				t.Fatalf("exit code %d; stderr:\n%s", code, errOut)
			}
			if got := shownPin(out); !samePin(got, want) {
				t.Errorf("shown pin = %+v, want %+v; output:\n%s", got, want, out)
			}
		})
		t.Run(name+"/json", func(t *testing.T) {
			code, out, errOut := cliRun(nil, "profiles", "show", "--json", "--profiles-dir", shippedProfiles, name)
			if code != exitOK {
				t.Fatalf("exit code %d; stderr:\n%s", code, errOut)
			}
			var got showJSON
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("decode %s: %v", out, err)
			}
			if !samePin(got.Pin, want) {
				t.Errorf("shown pin = %+v, want %+v", got.Pin, want)
			}
			if got.Profile["name"] != name || got.ResolvedBy != "name" {
				t.Errorf("profile name %v resolved by %q, want %s by name", got.Profile["name"], got.ResolvedBy, name)
			}
		})
	}
}

func TestProfilesShow(t *testing.T) {
	reg := loadShipped(t)
	tests := []struct {
		name       string
		in         []string
		env        map[string]string
		want       string // the profile shown
		wantBy     string // how the query resolved
		wantCode   int
		wantStdout []string
		wantStderr string
	}{{
		name: "alias", in: []string{"sonnet"}, want: "anthropic", wantBy: "alias",
		wantStdout: []string{"resolved: sonnet (alias) -> anthropic\n", "\nname ", "\nbase_url ", "\ncredential_env ", "\npolicy.max_attempts ", "\npricing.input ", "\navailability  ", "unavailable: $ANTHROPIC_API_KEY not set"},
	}, {
		name: "provider/model", in: []string{"anthropic/claude-sonnet-4-5"}, want: "anthropic", wantBy: "provider/model",
		wantStdout: []string{"resolved: anthropic/claude-sonnet-4-5 (provider/model) -> anthropic\n"},
	}, {
		name: "same model, other provider", in: []string{"claude-code/claude-sonnet-4-5"}, want: "claude-code", wantBy: "provider/model",
		wantStdout: []string{"\nbinary ", "\ninstall_hint ", "\nenv_allow ", "\nenv.DISABLE_TELEMETRY "},
	}, {
		name: "credential set", in: []string{"gpt"}, env: map[string]string{"OPENAI_API_KEY": "sk-do-not-print"}, want: "openai", wantBy: "alias",
		wantStdout: []string{"\navailability  ", "available\n", "\nomit_temperature "},
	}, {
		name: "profile name", in: []string{"fixture"}, want: "fixture", wantBy: "name",
	}, {
		name: "directory from the environment", in: []string{"flash"}, env: map[string]string{"AGENTMESH_PROFILES_DIR": shippedProfiles}, want: "gemini", wantBy: "alias",
	},
		{name: "unknown", in: []string{"nope"}, wantCode: exitFail, wantStderr: `unknown profile: "nope" in ../../profiles (names and aliases: anthropic,`},
		{name: "unknown provider/model", in: []string{"anthropic/gpt-5.6"}, wantCode: exitFail, wantStderr: `unknown profile: "anthropic/gpt-5.6"`},
		{name: "no name", in: nil, wantCode: exitUsage, wantStderr: "want one profile name"},
		{name: "two names", in: []string{"a", "b"}, wantCode: exitUsage, wantStderr: "got 2 arguments"},
		{name: "bad directory", in: []string{"fixture", "--profiles-dir", "testdata/none"}, wantCode: exitUsage, wantStderr: "--profiles-dir testdata/none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"profiles", "show"}
			if tt.env["AGENTMESH_PROFILES_DIR"] == "" {
				args = append(args, "--profiles-dir", shippedProfiles)
			}
			args = append(args, tt.in...)
			code, out, errOut := cliRun(tt.env, args...)
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, errOut)
			}
			if !strings.Contains(errOut, tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantStderr)
			}
			for _, env := range tt.env {
				if strings.Contains(out+errOut, env) && strings.HasPrefix(env, "sk-") {
					t.Errorf("output shows the value of a credential variable:\n%s", out)
				}
			}
			if tt.wantCode != exitOK {
				return
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout has no %q:\n%s", w, out)
				}
			}
			_, wantPin, err := reg.Resolve(tt.in[0])
			if err != nil {
				t.Fatal(err)
			}
			if got := shownPin(out); !samePin(got, wantPin) || wantPin.RegistryVersion != tt.want+":"+reg.Version() {
				t.Errorf("shown pin = %+v, want %+v of profile %s", got, wantPin, tt.want)
			}
			if got := shownRows(out)["name"]; got != tt.want {
				t.Errorf("shown name = %q, want %s:\n%s", got, tt.want, out)
			}

			code, out, errOut = cliRun(tt.env, append(args, "--json")...)
			if code != exitOK {
				t.Fatalf("--json: exit code %d; stderr:\n%s", code, errOut)
			}
			var got showJSON
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("decode %s: %v", out, err)
			}
			if got.Query != tt.in[0] || got.ResolvedBy != tt.wantBy || got.Profile["name"] != tt.want || !samePin(got.Pin, wantPin) {
				t.Errorf("--json = %+v, want query %q resolved by %s to %s with pin %+v", got, tt.in[0], tt.wantBy, tt.want, wantPin)
			}
		})
	}
}

func TestProfilesList(t *testing.T) {
	reg := loadShipped(t)
	type row struct{ name, adapter, transport, model, aliases, availability string }
	want := map[string]row{}
	for _, p := range reg.All() {
		r := row{p.Name, p.Adapter, string(p.Transport), p.Model, strings.Join(p.Aliases, ","), "-"}
		if r.aliases == "" {
			r.aliases = "-"
		}
		want[p.Name] = r
	}
	// A PATH where claude and pi are installed (gemini is there, but not
	// executable), and the shipped CLI profiles' binaries.
	bin := t.TempDir()
	for name, mode := range map[string]os.FileMode{"claude": 0o755, "pi": 0o755, "gemini": 0o644} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	clis := map[string]string{"claude-code": "claude", "claude-acp": "claude-agent-acp", "codex": "codex", "codex-acp": "codex-acp",
		"gemini": "gemini", "gemini-acp": "gemini", "pi": "pi"}
	notInstalled := func(installed ...string) map[string]string {
		m := map[string]string{}
		for name, b := range clis {
			m[name] = "not installed: " + b + " is not on PATH"
			if slices.Contains(installed, b) {
				m[name] = "installed"
			}
		}
		return m
	}
	tests := []struct {
		name string
		env  map[string]string
		want map[string]string // availability by profile name, of the profiles that name a credential or a CLI
	}{{
		name: "no credentials",
		want: maps.Collect(func(yield func(string, string) bool) {
			for k, v := range notInstalled() {
				yield(k, v)
			}
			yield("anthropic", "unavailable: $ANTHROPIC_API_KEY not set")
			yield("openai", "unavailable: $OPENAI_API_KEY not set")
		}),
	}, {
		name: "one credential, two CLIs",
		env:  map[string]string{"OPENAI_API_KEY": "sk-do-not-print", "ANTHROPIC_API_KEY": "", "PATH": t.TempDir() + string(filepath.ListSeparator) + bin},
		want: maps.Collect(func(yield func(string, string) bool) {
			for k, v := range notInstalled("claude", "pi") {
				yield(k, v)
			}
			yield("anthropic", "unavailable: $ANTHROPIC_API_KEY not set")
			yield("openai", "available")
		}),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := cliRun(tt.env, "profiles", "list", "--profiles-dir", shippedProfiles)
			if code != exitOK {
				t.Fatalf("exit code %d; stderr:\n%s", code, errOut)
			}
			if strings.Contains(out, "sk-do-not-print") {
				t.Errorf("list shows a credential's value:\n%s", out)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != len(want)+2 || lines[0] != "registry version "+reg.Version() || !strings.HasPrefix(lines[1], "NAME ") {
				t.Fatalf("want the registry version, a header and %d profiles, got:\n%s", len(want), out)
			}
			seen := map[string]bool{}
			for _, l := range lines[2:] {
				f := strings.Fields(l)
				if len(f) < 6 {
					t.Fatalf("line %q has %d fields, want 6", l, len(f))
				}
				w, ok := want[f[0]]
				if !ok {
					t.Fatalf("line %q: no profile %s", l, f[0])
				}
				seen[f[0]] = true
				if a, ok := tt.want[f[0]]; ok {
					w.availability = a
				}
				got := row{f[0], f[1], f[2], f[3], f[4], strings.Join(f[5:], " ")}
				if got != w {
					t.Errorf("line %q = %+v, want %+v", l, got, w)
				}
			}
			if len(seen) != len(want) {
				t.Errorf("listed %d profiles, want %d:\n%s", len(seen), len(want), out)
			}

			code, out, errOut = cliRun(tt.env, "profiles", "list", "--json", "--profiles-dir", shippedProfiles)
			if code != exitOK {
				t.Fatalf("--json: exit code %d; stderr:\n%s", code, errOut)
			}
			var got struct {
				RegistryVersion string      `json:"registry_version"`
				Profiles        []listEntry `json:"profiles"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("decode %s: %v", out, err)
			}
			if got.RegistryVersion != reg.Version() || len(got.Profiles) != len(want) {
				t.Fatalf("--json = version %s, %d profiles; want %s, %d", got.RegistryVersion, len(got.Profiles), reg.Version(), len(want))
			}
			for i, p := range reg.All() {
				e := got.Profiles[i]
				if e.Name != p.Name || e.Adapter != p.Adapter || e.Transport != p.Transport || e.Model != p.Model || strings.Join(e.Aliases, ",") != strings.Join(p.Aliases, ",") || e.CredentialEnv != p.CredentialEnv {
					t.Errorf("--json profile %d = %+v, want %s", i, e, p.Name)
				}
				a, credential := tt.want[p.Name]
				if credential != (e.Available != nil) || credential && *e.Available != (a == "available" || a == "installed") {
					t.Errorf("--json %s available = %v, want %q", p.Name, e.Available, a)
				}
			}
		})
	}
}

// writeProfiles writes a profiles directory of files named to contents.
func writeProfiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// shipped returns the shipped profile document name.yaml, with each pair
// of replace applied.
func shipped(t *testing.T, name string, replace ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(shippedProfiles, name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("%s.yaml has no %q", name, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	return s
}

func TestProfilesValidate(t *testing.T) {
	reg := loadShipped(t)
	tests := []struct {
		name     string
		files    map[string]string // a temporary profiles directory; nil: the shipped one
		wantCode int
		want     [][]string // each a problem line's parts: the file, the field, ...
	}{{
		name: "shipped",
	}, {
		name:     "unknown field",
		files:    map[string]string{"fixture.yaml": shipped(t, "fixture"), "bad.yaml": shipped(t, "ollama", "name: ollama", "name: local\nbogus_field: 1")},
		wantCode: exitFail,
		want:     [][]string{{"bad.yaml", "bogus_field"}},
	}, {
		name:     "two unknown fields, two problems",
		files:    map[string]string{"bad.yaml": shipped(t, "fixture") + "bogus_one: 1\nbogus_two: 2\n"},
		wantCode: exitFail,
		want:     [][]string{{"bad.yaml", "bogus_one"}, {"bad.yaml", "bogus_two"}},
	}, {
		name:     "bad base_url",
		files:    map[string]string{"fixture.yaml": shipped(t, "fixture"), "bad.yaml": shipped(t, "ollama", "http://127.0.0.1:11434", "ftp://models.example.com")},
		wantCode: exitFail,
		want:     [][]string{{"bad.yaml", "base_url"}},
	}, {
		name:     "loopback base_url without allow_loopback",
		files:    map[string]string{"local.yaml": shipped(t, "ollama", "allow_loopback: true", "allow_loopback: false")},
		wantCode: exitFail,
		want:     [][]string{{"local.yaml", "base_url", "allow_loopback"}},
	}, {
		name: "every file's problem",
		files: map[string]string{
			"a.yaml": shipped(t, "ollama", "http://127.0.0.1:11434", "models.example.com"),
			"b.yaml": shipped(t, "openai", "name: openai", "name: other", "https://api.openai.com/v1", "https://"),
		},
		wantCode: exitFail,
		want:     [][]string{{"a.yaml", "base_url"}, {"b.yaml", "base_url"}},
	}, {
		name:     "contradicts its adapter",
		files:    map[string]string{"fixture.yaml": shipped(t, "fixture", "transport: in_process", "transport: remote\nbase_url: https://fixture.example.com")},
		wantCode: exitFail,
		want:     [][]string{{"fixture.yaml", "transport"}},
	}, {
		name:     "no profiles",
		files:    map[string]string{"README.md": "no profiles here"},
		wantCode: exitFail,
		want:     [][]string{{"no *.yaml file"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := shippedProfiles
			if tt.files != nil {
				dir = writeProfiles(t, tt.files)
			}
			code, out, errOut := cliRun(nil, "profiles", "validate", "--profiles-dir", dir)
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.wantCode, out, errOut)
			}
			if tt.wantCode == exitOK {
				if want := "ok: " + strconv.Itoa(len(reg.Names())) + " profiles, registry version " + reg.Version() + "\n"; out != want || errOut != "" {
					t.Errorf("stdout = %q, stderr = %q; want stdout %q", out, errOut, want)
				}
				return
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			last := lines[len(lines)-1]
			lines = lines[:len(lines)-1]
			if !strings.HasPrefix(last, "agentmesh: profiles validate: "+dir+": ") || !strings.HasSuffix(last, strconv.Itoa(len(lines))+" problem(s)") {
				t.Errorf("last line = %q, want the count of %d problems", last, len(lines))
			}
		want:
			for _, w := range tt.want {
				for _, l := range lines {
					if containsAll(l, w) {
						continue want
					}
				}
				t.Errorf("no problem line names all of %q; stderr:\n%s", w, errOut)
			}
		})
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestProblems(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{name: "one", in: "a.yaml: name: bad", want: []string{"a.yaml: name: bad"}},
		{name: "joined", in: "a.yaml: name: bad\nb.yaml: model: bad", want: []string{"a.yaml: name: bad", "b.yaml: model: bad"}},
		{
			name: "indented lines continue",
			in:   "a.yaml: yaml: unmarshal errors:\n  line 3: field x not found\n  line 4: field y not found\nb.yaml: model: bad",
			want: []string{"a.yaml: yaml: unmarshal errors: line 3: field x not found", "a.yaml: yaml: unmarshal errors: line 4: field y not found", "b.yaml: model: bad"},
		},
		{name: "blank lines", in: "\na\n\nb\n", want: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := problems(errorString(tt.in)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestProfilesCommandLine(t *testing.T) {
	tests := []struct {
		name       string
		in         []string
		env        map[string]string
		want       int
		wantStdout string
		wantStderr string
	}{
		{name: "listed in the usage", in: []string{"help"}, want: exitOK, wantStdout: "profiles   list, show or validate"},
		{name: "no subcommand", in: []string{"profiles"}, want: exitUsage, wantStderr: "usage: agentmesh profiles <list|show|validate>"},
		{name: "help", in: []string{"profiles", "--help"}, want: exitOK, wantStdout: "validate load the profiles strictly"},
		{name: "unknown subcommand", in: []string{"profiles", "edit"}, want: exitUsage, wantStderr: `unknown subcommand "edit"`},
		{name: "subcommand help", in: []string{"profiles", "show", "-h"}, want: exitOK, wantStderr: "usage: agentmesh profiles show [flags] <name|alias|provider/model>"},
		{name: "unknown flag", in: []string{"profiles", "list", "--nope"}, want: exitUsage, wantStderr: "flag provided but not defined"},
		{name: "list takes no argument", in: []string{"profiles", "list", "x"}, want: exitUsage, wantStderr: `unexpected argument "x"`},
		{name: "validate takes no --json", in: []string{"profiles", "validate", "--json"}, want: exitUsage},
		{name: "directory from the environment", in: []string{"profiles", "validate"}, env: map[string]string{"AGENTMESH_PROFILES_DIR": shippedProfiles}, want: exitOK, wantStdout: "ok: "},
		{name: "default directory", in: []string{"profiles", "list"}, want: exitUsage, wantStderr: "--profiles-dir profiles: "},
		{name: "list of a bad directory", in: []string{"profiles", "list", "--profiles-dir", "testdata/none"}, want: exitUsage, wantStderr: "no *.yaml file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := cliRun(tt.env, tt.in...)
			if code != tt.want {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.want, errOut)
			}
			if !strings.Contains(out, tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", out, tt.wantStdout)
			}
			if !strings.Contains(errOut, tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantStderr)
			}
		})
	}
}
