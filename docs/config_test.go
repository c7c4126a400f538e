package docs_test

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/runner/runnerservice"
	"github.com/agentmesh/agentmesh/pkg/service"
	"github.com/agentmesh/agentmesh/pkg/service/serviceconfig"
	"github.com/kelseyhightower/envconfig"
)

// update rewrites the generated parts of the docs: go test ./docs -run
// TestConfigReference -update.
var update = flag.Bool("update", false, "rewrite the generated part of docs/configuration.md")

// configSection is one table of the reference: a service and its spec.
type configSection struct {
	title string
	spec  any  // a pointer to the service's Config
	all   bool // list the common variables too (only the common table)
}

func configSections() []configSection {
	return []configSection{
		{"Every service (`service.Config`)", &service.Config{}, true},
		{"`router`", &serviceconfig.Router{}, false},
		{"`subprocess-runner` and `remote-runner` (`runnerservice.Spec`)", runnerservice.Subprocess.NewSpec(), false},
		{"`sweeper`", &serviceconfig.Sweeper{}, false},
		{"`exporter`", &serviceconfig.Exporter{}, false},
		{"`gateway`", &serviceconfig.Gateway{}, false},
	}
}

// undescribed describes the variables whose field has no desc tag (their
// field comments speak of the code, not the setting); names, types and
// defaults still come from the structs. TestConfigReference fails on an
// entry no spec reads.
var undescribed = map[string]string{
	"AGENTMESH_NATS_URL":              "NATS server URL; it may carry a user and password or a token",
	"AGENTMESH_PREFIX":                "a subject token put before every subject and, with `_`, every stream and bucket name (empty: none)",
	"AGENTMESH_SHUTDOWN_TIMEOUT":      "how long a service may take to stop, tracing's flush included",
	"AGENTMESH_REPLICAS":              "replicas of every stream and bucket (1 to 5; 3 on a cluster)",
	"AGENTMESH_EVENTS_MAX_AGE":        "how long run events are kept (at least 2m, the events' dedupe window)",
	"AGENTMESH_WORK_QUEUE_MAX":        "queued work per adapter over all tenants before `AdmissionRejected`",
	"AGENTMESH_WORK_QUEUE_TENANT_MAX": "queued work per tenant and adapter before `AdmissionRejected` (0: 256, or AGENTMESH_WORK_QUEUE_MAX if smaller)",
	"AGENTMESH_LEASE_TTL":             "how long a runner's lease lives without a renewal (a runner hosting a CLI adapter needs more than 9s)",
	"AGENTMESH_RUN_RETENTION":         "how long an ended run's record is kept, then `status` answers not found (at least 1s and at least AGENTMESH_EVENTS_MAX_AGE; the last service to start sets it on the runs bucket)",
	"AGENTMESH_LOG_LEVEL":             "level of the JSON log on stderr: debug, info, warn or error",
}

// configVar is one variable of a spec, as envconfig reads it.
type configVar struct {
	key, typ, def, desc string
}

// specVars walks spec as envconfig does (envconfig.Usagef) and describes
// each variable by its desc tag, else by its field's doc comment.
func specVars(t *testing.T, spec any) []configVar {
	t.Helper()
	docs := fieldDocs(t, spec)
	var b strings.Builder
	const format = "{{range .}}{{usage_key .}}\x1f{{usage_type .}}\x1f{{usage_default .}}\x1f{{usage_description .}}\x1f{{.Name}}\x1f{{.Field.Kind}}\x1f{{.Field.UnsafeAddr}}\x1e{{end}}"
	if err := envconfig.Usagef("AGENTMESH", spec, &b, format); err != nil {
		t.Fatal(err)
	}
	var out []configVar
	for _, rec := range strings.Split(b.String(), "\x1e") {
		f := strings.Split(rec, "\x1f")
		if len(f) != 7 {
			continue
		}
		key, typ, def, desc, name, kind, addr := f[0], f[1], f[2], f[3], f[4], f[5], f[6]
		if kind == "struct" && typ == "" {
			continue // a nested Config: its fields follow
		}
		if desc == "" {
			desc = undescribed[key]
		}
		if desc == "" {
			desc = docs[addr+" "+name]
		}
		out = append(out, configVar{key: key, typ: typ, def: def, desc: desc})
	}
	return out
}

// fieldDocs maps "<address> <field name>" of every field of spec (nested
// structs included) to the field's doc comment in its package's source.
func fieldDocs(t *testing.T, spec any) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		typ := v.Type()
		for i := 0; i < typ.NumField(); i++ {
			sf := typ.Field(i)
			if !sf.IsExported() {
				continue
			}
			fv := v.Field(i)
			out[fmt.Sprint(fv.UnsafeAddr())+" "+sf.Name] = sourceDoc(t, typ, sf.Name)
			if fv.Kind() == reflect.Struct {
				walk(fv)
			}
		}
	}
	walk(reflect.ValueOf(spec).Elem())
	return out
}

const module = "github.com/agentmesh/agentmesh/"

var parsed = map[string]map[string]*ast.StructType{}

// sourceDoc is the doc comment of field name of the struct type typ, read
// from its package's source, on one line; "" for a type outside the module
// or of a test.
func sourceDoc(t *testing.T, typ reflect.Type, name string) string {
	t.Helper()
	dir, ok := strings.CutPrefix(typ.PkgPath(), module)
	if !ok {
		return ""
	}
	structs, ok := parsed[dir]
	if !ok {
		structs = map[string]*ast.StructType{}
		fset := token.NewFileSet()
		files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if ts, ok := n.(*ast.TypeSpec); ok {
					if st, ok := ts.Type.(*ast.StructType); ok {
						structs[ts.Name.Name] = st
					}
				}
				return true
			})
		}
		parsed[dir] = structs
	}
	st := structs[typ.Name()]
	if st == nil {
		return ""
	}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if n.Name == name {
				doc := f.Doc.Text()
				if doc == "" {
					doc = f.Comment.Text()
				}
				return strings.Join(strings.Fields(doc), " ")
			}
		}
	}
	return ""
}

// renderConfig is the generated part of docs/configuration.md.
func renderConfig(t *testing.T) string {
	t.Helper()
	common := map[string]bool{}
	for _, v := range specVars(t, &service.Config{}) {
		common[v.key] = true
	}
	var b strings.Builder
	for i, s := range configSections() {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %s\n\n", s.title)
		b.WriteString("| variable | type | default | description |\n|---|---|---|---|\n")
		for _, v := range specVars(t, s.spec) {
			if !s.all && common[v.key] {
				continue
			}
			def := "—"
			if v.def != "" {
				def = "`" + v.def + "`"
			}
			desc := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(v.desc)
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.key, v.typ, def, desc)
		}
	}
	return b.String()
}

const (
	beginGenerated = "<!-- BEGIN GENERATED by go test ./docs -run TestConfigReference -update; do not edit -->"
	endGenerated   = "<!-- END GENERATED -->"
)

// TestConfigReference checks that docs/configuration.md's tables are what
// the services' envconfig specs say (with -update, rewrites them), and that
// the page names every variable of service.KnownVariables.
func TestConfigReference(t *testing.T) {
	path := filepath.Join(root, "docs", "configuration.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	before, rest, ok1 := strings.Cut(page, beginGenerated+"\n")
	got, after, ok2 := strings.Cut(rest, endGenerated)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no %q ... %q markers", path, beginGenerated, endGenerated)
	}
	want := renderConfig(t)
	if got != want {
		if *update {
			page = before + beginGenerated + "\n" + want + endGenerated + after
			if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			t.Errorf("%s is out of date with the services' configuration; run go test ./docs -run TestConfigReference -update", path)
		}
	}
	for _, name := range service.KnownVariables {
		if !strings.Contains(page, "`"+name+"`") {
			t.Errorf("%s does not name %s (service.KnownVariables)", path, name)
		}
	}
	read := map[string]bool{}
	for _, s := range configSections() {
		for _, v := range specVars(t, s.spec) {
			read[v.key] = true
			if v.desc == "" {
				t.Errorf("%s has neither a desc tag nor a doc comment to describe it in %s", v.key, path)
			}
		}
	}
	for key := range undescribed {
		if !read[key] {
			t.Errorf("docs/config_test.go describes %s, which no spec reads", key)
		}
	}
}
