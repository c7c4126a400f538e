package gemini

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentmesh/agentmesh/pkg/wire"
)

// SharedSettingsDir is the settings directory that does not depend on the
// runner's home: the second of SettingsDirs. A runner that is not root
// cannot create a directory Gemini CLI accepts, so root provisions this
// one for it (see the package doc, "Retries").
const SharedSettingsDir = "/var/cache/agentmesh/gemini"

// SettingsDirs are the candidate directories for the retry settings files,
// in order of preference: agentmesh/gemini under the user cache
// directory, SharedSettingsDir, and a per-user directory in the system temp
// directory. The adapter uses the first whose file Gemini CLI would accept;
// whether it does depends on the directories above it, not on the order.
func SettingsDirs() []string {
	var dirs []string
	if d, err := os.UserCacheDir(); err == nil {
		dirs = append(dirs, filepath.Join(d, "agentmesh", "gemini"))
	}
	return append(dirs, SharedSettingsDir, filepath.Join(os.TempDir(), fmt.Sprintf("agentmesh-gemini-%d", os.Getuid())))
}

// SettingsFileName is the name of the file that holds general.maxAttempts
// n, in whichever directory of SettingsDirs is used.
func SettingsFileName(n int) string {
	return fmt.Sprintf("system-settings-max-attempts-%d.json", n)
}

// SettingsContent is the content of the file for general.maxAttempts n.
func SettingsContent(n int) []byte {
	return fmt.Appendf(nil, "{\"general\":{\"maxAttempts\":%d}}\n", n)
}

// cliRule is the check Gemini CLI 0.61.0 applies before it loads the file
// GEMINI_CLI_SYSTEM_SETTINGS_PATH names (isFileAndDirectorySecureSync, on
// Linux and macOS): the file and every directory from its parent up to "/"
// must be owned by root and not writable by group or others (a sticky bit
// does not help: /tmp, mode 1777, fails), a symlink among them must itself
// be owned by root, and when the path resolves elsewhere the resolved file
// and its directories must pass too. A path that does not exist passes. A
// file that fails is skipped with a warning on stderr, and the CLI keeps
// its own retry policy.
var cliRule = rule{owner: 0}

// rule is a parameterized cliRule, so tests can run it on directories a
// test may create.
type rule struct {
	// owner is the only owner accepted: root (0) for the CLI.
	owner uint32
	// above, in tests only, is a directory that counts as accepted, with
	// everything above it; "" checks up to "/" as the CLI does.
	above string
}

// refusal says why the CLI would skip file as its system settings, or
// returns nil.
func (r rule) refusal(file string) error {
	file, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return nil // the CLI loads nothing, and has nothing to refuse
	}
	if err := r.chain(file); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(file)
	if err != nil || real == file {
		return nil // as the CLI: an unresolvable path is checked as written
	}
	if err := r.chain(real); err != nil {
		return fmt.Errorf("resolved to %s: %w", real, err)
	}
	return nil
}

// chain checks every directory above file, from its parent to "/", then
// the file, in the CLI's order.
func (r rule) chain(file string) error {
	for _, dir := range ancestors(filepath.Dir(file)) {
		if err := r.path(dir, true); err != nil {
			return fmt.Errorf("parent directory %s: %w", dir, err)
		}
	}
	return r.path(file, false)
}

// ancestors are dir, its parent, …, "/".
func ancestors(dir string) []string {
	out := []string{dir}
	for {
		next := filepath.Dir(dir)
		if next == dir {
			return out
		}
		out = append(out, next)
		dir = next
	}
}

// path checks one path: a missing path passes; otherwise it must be of the
// kind expected, a symlink must be owned by owner, and what it names must
// be owned by owner and not writable by group or others.
func (r rule) path(p string, dir bool) error {
	if r.above != "" && (p == r.above || !strings.HasPrefix(p, r.above+string(filepath.Separator))) {
		return nil
	}
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case dir && !fi.IsDir():
		return errors.New("not a directory")
	case !dir && !fi.Mode().IsRegular():
		return errors.New("not a regular file")
	}
	if li, err := os.Lstat(p); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		if uid := owner(li); uid != r.owner {
			return fmt.Errorf("a symlink owned by uid %d, not %d", uid, r.owner)
		}
	}
	if uid := owner(fi); uid != r.owner {
		return fmt.Errorf("owned by uid %d, not %d", uid, r.owner)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		mode := fi.Mode().Perm()
		if fi.Mode()&fs.ModeSticky != 0 {
			mode |= 0o1000
		}
		return fmt.Errorf("writable by group or others (mode %#o)", uint32(mode))
	}
	return nil
}

// dirRefusal checks, before anything is created, a directory that may not
// exist yet: every existing directory from dir up must pass, and if some
// are missing, this process must be the owner the rule accepts, since it
// will own what it creates.
func (r rule) dirRefusal(dir string) error {
	missing := false
	for _, d := range ancestors(dir) {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			missing = true
			continue
		}
		if err := r.path(d, true); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
	}
	if uid := uint32(os.Geteuid()); missing && uid != r.owner {
		return fmt.Errorf("does not exist, and what this runner (uid %d) creates is not owned by uid %d", uid, r.owner)
	}
	return nil
}

func owner(fi fs.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0) // unknown: never the accepted owner
}

// settingsFiles keeps one read-only system settings file per maxAttempts
// value. A file's content is fixed by its name, it is replaced only by an
// atomic rename of identical content, and it is checked on every use (a
// cleaner may remove it), so concurrent runs, and several runner
// processes, share them without coordination.
type settingsFiles struct {
	// dirs are the candidate directories, in order of preference.
	dirs func() []string
	// rule is the CLI's acceptance check.
	rule rule
}

// path returns the settings file for n attempts in the first candidate
// directory whose file the CLI accepts, creating it if needed. Its error
// names every candidate and why it was not used.
func (s settingsFiles) path(n int) (string, error) {
	var why []string
	for _, dir := range s.dirs() {
		p, err := s.file(dir, n)
		if err == nil {
			return p, nil
		}
		why = append(why, fmt.Sprintf("%s: %v", dir, err))
	}
	if len(why) == 0 {
		return "", errors.New("no candidate directory")
	}
	return "", errors.New(strings.Join(why, "; "))
}

func (s settingsFiles) file(dir string, n int) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	// The file overrides every other settings layer of the CLI, and the
	// CLI's own check makes its directories root's alone.
	if err := s.rule.dirRefusal(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := filepath.Join(dir, SettingsFileName(n))
	want := SettingsContent(n)
	if got, err := os.ReadFile(name); err == nil && bytes.Equal(got, want) {
		if err := s.rule.refusal(name); err == nil {
			return name, nil
		}
	}
	tmp, err := os.CreateTemp(dir, ".settings-*")
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(want)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o400)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := s.rule.refusal(name); err != nil {
		return "", err
	}
	return name, nil
}

// skipWarning is how Gemini CLI 0.61.0 says on stderr that it did not load
// the system settings file: "Security Warning: Skipping system settings
// file '<path>': <reason>".
const skipWarning = "Skipping system settings file"

// refusalWatch is the Invocation's stderr watch: the CLI's skip warning
// ends the run with a ProviderTransportError, because the CLI would go on
// with its own retry policy instead of the run's. The adapter writes only
// files the CLI's check passes, so this is a last line of defence, for
// example against a directory changed under a running runner.
func refusalWatch(path string, n int) func(string) error {
	return func(line string) error {
		if !strings.Contains(line, skipWarning) {
			return nil
		}
		return wire.Errorf(wire.ProviderTransportError,
			"%s: Gemini CLI skipped the retry settings file %s (general.maxAttempts %d) and would retry up to %d times on its own, so the run was stopped: %s",
			Name, path, n, MaxCLIAttempts, strings.TrimSpace(line))
	}
}
