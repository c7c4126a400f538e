package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// BaseRef is the ref, in a workspace's private git dir, of the tree the
// run started from: Diff is against it.
const BaseRef = "refs/agentmesh/base"

// attributes is every private git dir's info/attributes, which outranks a
// tree's own .gitattributes: no end-of-line conversion, clean or smudge
// filter, ident or encoding conversion touches a file's bytes, so what is
// committed, diffed, checked out and applied is the bytes on disk.
const attributes = "* -text -filter -ident -working-tree-encoding\n"

// gitConfig is passed to every git command: nothing of the user's, the
// system's or the tree's configuration is read (see gitEnv), no hook runs,
// and only the file, https and ssh transports may be used.
var gitConfig = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.autocrlf=false",
	"-c", "core.safecrlf=false",
	"-c", "core.symlinks=true",
	"-c", "core.filemode=true",
	"-c", "core.fsmonitor=false",
	"-c", "core.quotePath=false",
	"-c", "core.excludesFile=/dev/null",
	"-c", "diff.noprefix=false",
	"-c", "diff.mnemonicPrefix=false",
	"-c", "init.defaultBranch=main",
	"-c", "protocol.allow=never",
	"-c", "protocol.file.allow=always",
	"-c", "protocol.https.allow=always",
	"-c", "protocol.ssh.allow=always",
	"-c", "transfer.fsckObjects=true",
	"-c", "advice.detachedHead=false",
	"-c", "user.name=agentmesh",
	"-c", "user.email=agentmesh@localhost",
}

// gitEnv is every git command's whole environment: PATH only, no HOME, and
// the variables that stop git from reading a system or global config or
// asking for a password.
func gitEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_AUTHOR_DATE=1970-01-01T00:00:00Z",
		"GIT_COMMITTER_DATE=1970-01-01T00:00:00Z",
	}
}

// git runs one git command against the private gitDir and, when workTree
// is not "", that work tree, from the work tree (or gitDir). Its stdout
// goes to out when out is not nil; an error carries stderr's first 4 KiB.
func git(ctx context.Context, gitDir, workTree string, stdin io.Reader, out io.Writer, args ...string) error {
	full := append(append([]string{}, gitConfig...), "--git-dir="+gitDir)
	dir := gitDir
	if workTree != "" {
		full = append(full, "--work-tree="+workTree)
		dir = workTree
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	cmd.Stdin = stdin
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &limitWriter{w: &stderr, limit: 4096, what: "stderr"}
	if err := cmd.Run(); err != nil {
		// Over the limit, git dies of SIGPIPE (or the copy fails): the
		// limit is the reason.
		if lw, ok := out.(*limitWriter); ok && lw.over != nil {
			return lw.over
		}
		return fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// gitOutput is git with its stdout returned.
func gitOutput(ctx context.Context, gitDir, workTree string, args ...string) (string, error) {
	var out bytes.Buffer
	if err := git(ctx, gitDir, workTree, nil, &out, args...); err != nil {
		return "", err
	}
	return strings.TrimSpace(out.String()), nil
}

// initGitDir makes gitDir, which must not exist, an empty repository with
// no hooks (an empty template) and the attributes above.
func initGitDir(ctx context.Context, gitDir string) error {
	if _, err := os.Lstat(gitDir); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("git dir %s already exists", gitDir)
	}
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, gitConfig...), "init", "-q", "--bare", "--template=", gitDir)...)
	cmd.Env = gitEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git init: %w: %s", err, bytes.TrimSpace(out))
	}
	if err := os.MkdirAll(filepath.Join(gitDir, "info"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(gitDir, "info", "attributes"), []byte(attributes), 0o644)
}

// Materializer turns a git source into a workspace.
type Materializer struct {
	// GitAllow are the remotes a git source may name: a source's URL must
	// start with one of them. End a prefix with "/" to keep
	// "file:///srv/repos" from allowing "file:///srv/repos-other".
	GitAllow []string
	// MaxBytes bounds the source's tree: the sum of its blobs' sizes.
	// <= 0: no limit.
	MaxBytes int64
}

// Allowed returns a *NotAllowedError unless url starts with one of
// GitAllow (or the URL is empty or looks like an option).
func (m Materializer) Allowed(url string) error {
	if url == "" || strings.HasPrefix(url, "-") {
		return &NotAllowedError{URL: url}
	}
	for _, p := range m.GitAllow {
		if p != "" && strings.HasPrefix(url, p) {
			return nil
		}
	}
	return &NotAllowedError{URL: url}
}

// Git fetches src's ref (the remote's HEAD when Ref is empty) at depth 1
// into the private git dir gitDir and checks it out into dir. Neither may
// exist; gitDir must be outside dir, so nothing the agent writes into its
// workspace is ever read by git as its config or hooks. A remote outside
// the allow-list is refused with a *NotAllowedError before git runs, a
// tree over MaxBytes with a *TooLargeError before it is checked out. On
// any error neither dir nor gitDir is left. Then Record.
func (m Materializer) Git(ctx context.Context, src wire.GitSource, dir, gitDir string) (err error) {
	if err := m.Allowed(src.URL); err != nil {
		return err
	}
	if strings.HasPrefix(src.Ref, "-") {
		return &UnsafePathError{Path: src.Ref, Why: "a ref may not start with -"}
	}
	if inside(dir, gitDir) {
		return fmt.Errorf("git dir %s is inside the workspace %s", gitDir, dir)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("workspace %s already exists", dir)
	}
	if err := initGitDir(ctx, gitDir); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(gitDir)
			os.RemoveAll(dir)
		}
	}()
	ref := src.Ref
	if ref == "" {
		ref = "HEAD"
	}
	if err := git(ctx, gitDir, "", nil, nil, "fetch", "-q", "--depth=1", "--no-tags", "--", src.URL, ref); err != nil {
		return fmt.Errorf("fetch %s %s: %w", src.URL, ref, err)
	}
	if m.MaxBytes > 0 {
		if err := m.checkTreeSize(ctx, gitDir); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := git(ctx, gitDir, dir, nil, nil, "checkout", "-q", "--force", "--detach", "FETCH_HEAD"); err != nil {
		return fmt.Errorf("check out %s %s: %w", src.URL, ref, err)
	}
	return Record(ctx, dir, gitDir)
}

func (m Materializer) checkTreeSize(ctx context.Context, gitDir string) error {
	out, err := gitOutput(ctx, gitDir, "", "ls-tree", "-r", "-l", "-z", "FETCH_HEAD")
	if err != nil {
		return err
	}
	var total int64
	for _, line := range strings.Split(out, "\x00") {
		// "<mode> SP <type> SP <object> SP+ <size> TAB <path>"
		meta, _, _ := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if len(f) != 4 || f[1] != "blob" {
			continue
		}
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return fmt.Errorf("ls-tree size %q: %w", f[3], err)
		}
		total += n
		if total > m.MaxBytes {
			return &TooLargeError{What: "git tree", Limit: m.MaxBytes}
		}
	}
	return nil
}

// Record makes the tree in dir, as it is now, the base Diff compares with
// (BaseRef in gitDir). gitDir is made a private repository first if it
// does not exist yet (a workspace from a snapshot); every file is
// recorded, ignored or not.
func Record(ctx context.Context, dir, gitDir string) error {
	if _, err := os.Stat(gitDir); errors.Is(err, os.ErrNotExist) {
		if err := initGitDir(ctx, gitDir); err != nil {
			return err
		}
	}
	if err := git(ctx, gitDir, dir, nil, nil, "add", "-A", "-f", "--", "."); err != nil {
		return err
	}
	tree, err := gitOutput(ctx, gitDir, dir, "write-tree")
	if err != nil {
		return err
	}
	commit, err := gitOutput(ctx, gitDir, dir, "commit-tree", "-m", "agentmesh base", tree)
	if err != nil {
		return err
	}
	return git(ctx, gitDir, dir, nil, nil, "update-ref", BaseRef, commit)
}

// Diff writes a git-format binary patch of everything in dir that differs
// from the base Record recorded (added, changed, deleted, renamed files and
// mode changes, ignored files included; not empty directories, which git
// does not hold) to w; more than limit bytes of
// patch fail with a *TooLargeError (limit <= 0: no limit). Apply to a
// checkout of the base reproduces dir byte for byte.
func Diff(ctx context.Context, dir, gitDir string, w io.Writer, limit int64) error {
	if err := git(ctx, gitDir, dir, nil, nil, "add", "-A", "-f", "--", "."); err != nil {
		return err
	}
	return git(ctx, gitDir, dir, nil, &limitWriter{w: w, limit: limit, what: "patch"},
		"diff", "--cached", "--binary", "--full-index", "-M", "--no-color", "--no-ext-diff", "--no-textconv", BaseRef, "--")
}

// Archive writes a tar (as Pack writes it, gzip left to the caller) of the
// files in dir that were added or changed since the base, as they are now,
// to w; more than limit bytes fail with a *TooLargeError. Call it after
// Diff, which brings git's index up to date.
func Archive(ctx context.Context, dir, gitDir string, w io.Writer, limit int64) error {
	out, err := gitOutput(ctx, gitDir, dir, "diff", "--cached", "--name-only", "--no-renames", "--diff-filter=d", "-z", BaseRef, "--")
	if err != nil {
		return err
	}
	var names []string
	for _, n := range strings.Split(out, "\x00") {
		if n != "" {
			names = append(names, n)
		}
	}
	return writeTar(dir, names, w, limit, "archive")
}

// Apply applies a git-format (binary) patch, such as Diff writes, to the
// checkout dir, byte for byte. git runs with a throw-away private git dir,
// so neither dir's own .git config nor its hooks nor its .gitattributes
// play a part; a patch over limit bytes is refused with a *TooLargeError
// before anything is written, and git apply writes nothing unless every
// hunk applies.
func Apply(ctx context.Context, dir string, patch io.Reader, limit int64) error {
	var buf bytes.Buffer
	if _, err := io.Copy(&limitWriter{w: &buf, limit: limit, what: "patch"}, patch); err != nil {
		return err
	}
	if buf.Len() == 0 {
		return nil
	}
	tmp, err := os.MkdirTemp("", "agentmesh-apply-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	gitDir := filepath.Join(tmp, "git")
	if err := initGitDir(ctx, gitDir); err != nil {
		return err
	}
	return git(ctx, gitDir, dir, &buf, nil, "apply", "--binary", "--whitespace=nowarn", "-")
}

func inside(dir, p string) bool {
	d, err1 := filepath.Abs(dir)
	q, err2 := filepath.Abs(p)
	if err1 != nil || err2 != nil {
		return true
	}
	return q == d || strings.HasPrefix(q, d+string(filepath.Separator))
}
