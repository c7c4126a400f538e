package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/agentmesh/agentmesh/pkg/adapter/catalog"
	"github.com/agentmesh/agentmesh/pkg/profile"
	"github.com/agentmesh/agentmesh/pkg/wire"
	"go.yaml.in/yaml/v3"
)

// profilesCommands are the subcommands of agentmesh profiles. None of them
// talks to a mesh: they read the profile documents the services would read.
var profilesCommands = []command{
	{"list", "one line per profile, under the registry version", cmdProfilesList},
	{"show", "a profile, resolved from a name, an alias or provider/model, and its pin", cmdProfilesShow},
	{"validate", "load the profiles strictly and build their adapters", cmdProfilesValidate},
}

func profilesUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: agentmesh profiles <list|show|validate> [flags] [arguments]")
	fmt.Fprintln(w, "\nsubcommands:")
	for _, c := range profilesCommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'agentmesh profiles <subcommand> -h' for its flags.")
}

// cmdProfiles runs the profiles subcommand args names.
func cmdProfiles(ctx context.Context, args []string, io *stdio) error {
	if len(args) == 0 {
		profilesUsage(io.stderr)
		return &exitError{code: exitUsage}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		profilesUsage(io.stdout)
		return nil
	}
	for _, c := range profilesCommands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], io)
		}
	}
	fmt.Fprintf(io.stderr, "agentmesh: profiles: unknown subcommand %q\n\n", args[0])
	profilesUsage(io.stderr)
	return &exitError{code: exitUsage}
}

// profilesFlags are the flags of the profiles subcommands.
type profilesFlags struct {
	dir  string // profile documents
	json bool   // list and show: print JSON
}

// parseProfiles parses the arguments of agentmesh profiles <name> and
// returns the flags and the positional arguments. withJSON adds --json.
func parseProfiles(name, synopsis string, withJSON bool, args []string, io *stdio) (profilesFlags, []string, error) {
	var f profilesFlags
	fs := newFlagSet("profiles "+name, synopsis, io)
	fs.StringVar(&f.dir, "profiles-dir", io.envOr("AGENTMESH_PROFILES_DIR", "profiles"), "directory of the profile documents (*.yaml) (default from $AGENTMESH_PROFILES_DIR)")
	if withJSON {
		fs.BoolVar(&f.json, "json", false, "print JSON instead of text")
	}
	pos, err := parse(fs, args)
	return f, pos, err
}

// load loads the profiles of dir as the services do. A directory that does
// not load is a configuration problem, exit code 2; agentmesh profiles
// validate is the command that reports it in full.
func (f profilesFlags) load(cmd string) (*profile.Registry, error) {
	reg, err := catalog.Dirs{ProfilesDir: f.dir}.Profiles()
	if err != nil {
		return nil, usageErr("profiles %s: --profiles-dir %s: %w", cmd, f.dir, err)
	}
	return reg, nil
}

// availability tells whether this process's environment holds the
// credential variable a remote profile names, as the catalog's remote adapters
// decides it: set and non-empty. It reads only whether the variable is set,
// never prints its value, and is "" for a profile without credential_env.
// For a subprocess profile it tells whether its CLI (catalog.Binary) is
// installed: an executable on this environment's PATH. The runner that
// serves the profile may see another environment.
func availability(p *profile.Profile, io *stdio) (text string, available *bool) {
	if bin := catalog.Binary(p); bin != "" {
		ok := installed(bin, io.getenv("PATH"))
		if ok {
			return "installed", &ok
		}
		return fmt.Sprintf("not installed: %s is not on PATH", bin), &ok
	}
	if p.CredentialEnv == "" {
		return "", nil
	}
	ok := io.getenv(p.CredentialEnv) != ""
	if ok {
		return "available", &ok
	}
	return fmt.Sprintf("unavailable: $%s not set", p.CredentialEnv), &ok
}

// installed reports whether bin is an executable file: bin itself when
// it names a directory, else in one of path's directories.
func installed(bin, path string) bool {
	exe := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
	}
	if strings.ContainsRune(bin, filepath.Separator) {
		return exe(bin)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir != "" && exe(filepath.Join(dir, bin)) {
			return true
		}
	}
	return false
}

// listEntry is one profile in agentmesh profiles list --json.
type listEntry struct {
	Name          string         `json:"name"`
	Adapter       string         `json:"adapter"`
	Transport     wire.Transport `json:"transport"`
	Model         string         `json:"model"`
	Aliases       []string       `json:"aliases"`
	CredentialEnv string         `json:"credential_env,omitempty"`
	// Available is set only for a profile with credential_env or a CLI:
	// its variable is set, its CLI is installed.
	Available *bool `json:"available,omitempty"`
}

// cmdProfilesList prints the registry version and one line per profile.
func cmdProfilesList(_ context.Context, args []string, io *stdio) error {
	f, pos, err := parseProfiles("list", "[flags]", true, args, io)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("profiles list: unexpected argument %q", pos[0])
	}
	reg, err := f.load("list")
	if err != nil {
		return err
	}
	if f.json {
		out := struct {
			RegistryVersion string      `json:"registry_version"`
			Profiles        []listEntry `json:"profiles"`
		}{RegistryVersion: reg.Version(), Profiles: []listEntry{}}
		for _, p := range reg.All() {
			_, ok := availability(p, io)
			out.Profiles = append(out.Profiles, listEntry{
				Name: p.Name, Adapter: p.Adapter, Transport: p.Transport, Model: p.Model,
				Aliases: append([]string{}, p.Aliases...), CredentialEnv: p.CredentialEnv, Available: ok,
			})
		}
		return encodeJSON(io.stdout, out)
	}
	fmt.Fprintf(io.stdout, "registry version %s\n", reg.Version())
	tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADAPTER\tTRANSPORT\tMODEL\tALIASES\tAVAILABILITY")
	for _, p := range reg.All() {
		avail, _ := availability(p, io)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Adapter, p.Transport, p.Model,
			orDash(strings.Join(p.Aliases, ",")), orDash(avail))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cmdProfilesShow prints one resolved profile and the pin a run made with
// it would carry. Exit code 1 when nothing resolves.
func cmdProfilesShow(_ context.Context, args []string, io *stdio) error {
	f, pos, err := parseProfiles("show", "[flags] <name|alias|provider/model>", true, args, io)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("profiles show: want one profile name, alias or provider/model, got %d arguments", len(pos))
	}
	query := pos[0]
	reg, err := f.load("show")
	if err != nil {
		return err
	}
	p, pin, err := reg.Resolve(query)
	if err != nil {
		return &exitError{code: exitFail, err: fmt.Errorf("profiles show: %w in %s (names and aliases: %s)", err, f.dir, strings.Join(knownNames(reg), ", "))}
	}
	doc, err := profileDocument(p)
	if err != nil {
		return fmt.Errorf("profiles show: %w", err)
	}
	how := resolvedBy(p, query)
	avail, ok := availability(p, io)
	if f.json {
		var fields map[string]any
		if err := doc.Decode(&fields); err != nil {
			return fmt.Errorf("profiles show: %w", err)
		}
		return encodeJSON(io.stdout, struct {
			Query      string         `json:"query"`
			ResolvedBy string         `json:"resolved_by"`
			Profile    map[string]any `json:"profile"`
			Available  *bool          `json:"available,omitempty"`
			Pin        wire.Pin       `json:"pin"`
		}{query, how, fields, ok, pin})
	}
	if how != "name" {
		fmt.Fprintf(io.stdout, "resolved: %s (%s) -> %s\n", query, how, p.Name)
	}
	tw := tabwriter.NewWriter(io.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	flatten("", doc, row)
	if avail != "" {
		row("availability", avail)
	}
	row("pin.provider", pin.Provider)
	row("pin.model", pin.Model)
	row("pin.profile_hash", pin.ProfileHash)
	row("pin.registry_version", pin.RegistryVersion)
	for _, class := range slices.Sorted(maps.Keys(pin.Pricing)) {
		row("pin.pricing."+class, pin.Pricing[class])
	}
	return tw.Flush()
}

// resolvedBy says how query named p: "name", "alias" or "provider/model",
// in the order Resolve tries them.
func resolvedBy(p *profile.Profile, query string) string {
	switch {
	case query == p.Name:
		return "name"
	case slices.Contains(p.Aliases, query):
		return "alias"
	default:
		return "provider/model"
	}
}

// knownNames is every profile name and alias, sorted.
func knownNames(reg *profile.Registry) []string {
	var out []string
	for _, p := range reg.All() {
		out = append(out, p.Name)
		out = append(out, p.Aliases...)
	}
	slices.Sort(out)
	return out
}

// profileDocument is p as a profile document: the schema's field names in
// the schema's order, fields left at their zero value omitted. Showing the
// document rather than a copy of its fields here keeps show complete when
// the schema gains a field.
func profileDocument(p *profile.Profile) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(p); err != nil {
		return nil, fmt.Errorf("encode profile %s: %w", p.Name, err)
	}
	return &n, nil
}

// flatten calls row for every scalar under n, keyed by its dotted path
// (policy.max_active, pricing.input); a list of scalars is one row, its
// items joined by commas.
func flatten(key string, n *yaml.Node, row func(k, v string)) {
	join := func(k string) string {
		if key == "" {
			return k
		}
		return key + "." + k
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			flatten(key, c, row)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			flatten(join(n.Content[i].Value), n.Content[i+1], row)
		}
	case yaml.SequenceNode:
		items := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			items = append(items, c.Value)
			if c.Kind != yaml.ScalarNode {
				items = nil
				break
			}
		}
		if items == nil {
			for i, c := range n.Content {
				flatten(join(strconv.Itoa(i)), c, row)
			}
			return
		}
		row(key, strings.Join(items, ","))
	default:
		row(key, n.Value)
	}
}

// cmdProfilesValidate loads the profiles strictly and builds every adapter
// they name, so that a profile contradicting its adapter is caught too.
// Exit code 0 with a summary line on stdout, or 1 with every problem on
// stderr, one per line.
func cmdProfilesValidate(_ context.Context, args []string, io *stdio) error {
	f, pos, err := parseProfiles("validate", "[flags]", false, args, io)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("profiles validate: unexpected argument %q", pos[0])
	}
	ac := catalog.Dirs{ProfilesDir: f.dir}
	reg, err := ac.Profiles()
	if err == nil {
		_, err = ac.Registry(reg)
	}
	if err != nil {
		lines := problems(err)
		for _, l := range lines {
			fmt.Fprintln(io.stderr, l)
		}
		return &exitError{code: exitFail, err: fmt.Errorf("profiles validate: %s: %d problem(s)", f.dir, len(lines))}
	}
	_, err = fmt.Fprintf(io.stdout, "ok: %d profiles, registry version %s\n", len(reg.Names()), reg.Version())
	return err
}

// problems splits err's message into one line per problem. The loader joins
// its problems with newlines. Indented lines under a line continue it (the
// YAML decoder lists each unknown field that way): each becomes a problem
// of its own, prefixed with the line it continues, so that every line
// names the file.
func problems(err error) []string {
	var out []string
	head, continued := "", false
	for _, l := range strings.Split(err.Error(), "\n") {
		switch {
		case strings.TrimSpace(l) == "":
		case head != "" && (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")):
			if !continued {
				out = out[:len(out)-1] // the head alone is no problem
				continued = true
			}
			out = append(out, head+" "+strings.TrimSpace(l))
		default:
			head, continued = l, false
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		out = []string{"invalid profiles: an error without a message"}
	}
	return out
}

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
