package main

import (
	"context"
	"strings"
	"testing"
)

func TestSplitGitRef(t *testing.T) {
	for _, tt := range []struct{ in, url, ref string }{
		{"file:///srv/repo.git", "file:///srv/repo.git", ""},
		{"file:///srv/repo.git@main", "file:///srv/repo.git", "main"},
		{"file:///srv/repo.git@feature/x", "file:///srv/repo.git", "feature/x"},
		{"https://git.example.com/a/b.git@v1.2", "https://git.example.com/a/b.git", "v1.2"},
		{"ssh://git@host.example/a/b.git", "ssh://git@host.example/a/b.git", ""},
		{"ssh://git@host.example/a/b.git@dev", "ssh://git@host.example/a/b.git", "dev"},
		{"git@github.com:a/b.git", "git@github.com:a/b.git", ""},
		{"git@github.com:a/b.git@release/1", "git@github.com:a/b.git", "release/1"},
		{"/srv/repo.git@main", "/srv/repo.git", "main"},
		{"https://host.example", "https://host.example", ""},
	} {
		if url, ref := splitGitRef(tt.in); url != tt.url || ref != tt.ref {
			t.Errorf("splitGitRef(%q) = %q, %q; want %q, %q", tt.in, url, ref, tt.url, tt.ref)
		}
	}
}

// TestRunWorkspaceFlags: run's --snapshot, --git and --push each name the
// run's workspace source, one at a time; a malformed source is a usage
// error naming its flag, a snapshot the tenant never pushed a failure
// naming it, and --push pushes the directory and runs on it (here on the
// fixture, which the router refuses for a workspace: the request carried
// the pushed snapshot).
func TestRunWorkspaceFlags(t *testing.T) {
	m := startUp(t, false)
	ctx := context.Background()
	unknown := "sha256:" + strings.Repeat("0", 64)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"notes.txt": "hello\n"})
	for _, tt := range []struct {
		name string
		args []string
		want int
		says string
	}{
		{"two sources", []string{"--snapshot", unknown, "--git", "file:///r.git"}, exitUsage, "--snapshot and --git each name the run's workspace"},
		{"a runtime workspace and a source", []string{"--workspace", "ws", "--push", dir}, exitUsage, "--workspace and --push"},
		{"a malformed snapshot", []string{"--snapshot", "sha256:abc"}, exitUsage, "--snapshot: snapshot id"},
		{"a ref that is an option", []string{"--git", "file:///r.git@--upload-pack=x"}, exitUsage, "--git: ref"},
		{"a push of no directory", []string{"--push", dir + "/notes.txt"}, exitUsage, "--push: "},
		{"a snapshot never pushed", []string{"--snapshot", unknown}, exitFail, "--snapshot: snapshot " + unknown + " is not stored for tenant default"},
		{"a push, then a profile that takes none", []string{"--push", dir}, exitFail, "workspace: profile fixture's adapter fixture is not a subprocess adapter"},
	} {
		code, out, errOut := m.cli(ctx, append(append([]string{"run", "-p", "fixture"}, tt.args...), "hi")...)
		if code != tt.want || !strings.Contains(out+errOut, tt.says) {
			t.Errorf("%s: exit %d; want %d saying %q; stdout:\n%s\nstderr:\n%s", tt.name, code, tt.want, tt.says, out, errOut)
		}
	}
}
