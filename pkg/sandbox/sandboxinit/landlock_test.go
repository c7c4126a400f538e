package sandboxinit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// TestMain runs the test binary as landlockChild when asked.
func TestMain(m *testing.M) {
	if dirs := os.Getenv("LANDLOCK_CHILD"); dirs != "" {
		os.Exit(landlockChild(strings.Split(dirs, "\n")))
	}
	goleak.VerifyTestMain(m)
}

// landlockChild fences itself with dirs[0] read-write, then writes in
// each of dirs and prints what happened.
func landlockChild(dirs []string) int {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 2
	}
	if err := applyLandlock(dirs[:1]); err != nil {
		os.Stdout.WriteString("applyLandlock: " + err.Error() + "\n")
		return 2
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "x"), []byte("x"), 0o644); err != nil {
			os.Stdout.WriteString("refused: " + errString(errors.Unwrap(err)) + "\n")
		} else {
			os.Stdout.WriteString("wrote\n")
		}
	}
	if _, err := os.ReadFile("/etc/hostname"); err != nil {
		os.Stdout.WriteString("read refused\n")
	} else {
		os.Stdout.WriteString("read\n")
	}
	return 0
}

// TestLandlock: fenced, a process writes in its read-write tree only
// (another directory it may write by its mode is refused), and reads
// the rest.
func TestLandlock(t *testing.T) {
	if _, err := LandlockABI(); err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	rw, other := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "LANDLOCK_CHILD="+rw+"\n"+other)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got, want := string(out), "wrote\nrefused: permission denied\nread\n"; got != want {
		t.Errorf("the fenced process printed %q, want %q", got, want)
	}
}
