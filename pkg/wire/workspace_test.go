package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestWorkspaceSourceCheck(t *testing.T) {
	id := SnapshotPrefix + strings.Repeat("ab", 32)
	for _, tt := range []struct {
		name  string
		src   WorkspaceSource
		field string // "" when the source is well formed
	}{
		{"a snapshot", WorkspaceSource{Snapshot: id}, ""},
		{"a git source", WorkspaceSource{Git: &GitSource{URL: "file:///srv/r.git", Ref: "main"}}, ""},
		{"a git source at HEAD", WorkspaceSource{Git: &GitSource{URL: "https://h/r.git"}}, ""},
		{"neither", WorkspaceSource{}, "workspace"},
		{"both", WorkspaceSource{Snapshot: id, Git: &GitSource{URL: "file:///r"}}, "workspace"},
		{"a short snapshot id", WorkspaceSource{Snapshot: "sha256:abc"}, "workspace.snapshot"},
		{"an upper-case snapshot id", WorkspaceSource{Snapshot: strings.ToUpper(id)}, "workspace.snapshot"},
		{"another digest", WorkspaceSource{Snapshot: "md5:" + strings.Repeat("a", 64)}, "workspace.snapshot"},
		{"no URL", WorkspaceSource{Git: &GitSource{Ref: "main"}}, "workspace.git.url"},
		{"a URL that is an option", WorkspaceSource{Git: &GitSource{URL: "--upload-pack=touch x"}}, "workspace.git.url"},
		{"a run", WorkspaceSource{FromRun: "run-1"}, ""},
		{"a run and a snapshot", WorkspaceSource{FromRun: "run-1", Snapshot: id}, "workspace"},
		{"a run id with a dot", WorkspaceSource{FromRun: "a.b"}, "workspace.from_run"},
		{"a ref that is an option", WorkspaceSource{Git: &GitSource{URL: "file:///r", Ref: "-x"}}, "workspace.git.ref"},
	} {
		err := tt.src.Check()
		var fe *WorkspaceFieldError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field || !strings.HasPrefix(err.Error(), tt.field+": ")):
			t.Errorf("%s: %v; want a refusal of %s", tt.name, err, tt.field)
		}
	}
}
