package sandbox

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// ptyEnv makes the test binary the pty child (ptyChild).
const ptyEnv = "SANDBOX_PTY_CHILD"

// ptyChild does what forkpty(3) does: opens /dev/ptmx, unlocks its pty,
// starts a shell with the pty as its controlling terminal, and prints
// what the shell wrote to it.
func ptyChild() int {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		os.Stdout.WriteString("open /dev/ptmx: " + err.Error() + "\n")
		return 1
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		os.Stdout.WriteString("unlock: " + err.Error() + "\n")
		return 1
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		os.Stdout.WriteString("TIOCGPTN: " + err.Error() + "\n")
		return 1
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		os.Stdout.WriteString("open the pty: " + err.Error() + "\n")
		return 1
	}
	sh := exec.Command("/bin/sh", "-c", "tty; echo in a pty")
	sh.Stdin, sh.Stdout, sh.Stderr = slave, slave, slave
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := sh.Start(); err != nil {
		os.Stdout.WriteString("start: " + err.Error() + "\n")
		return 1
	}
	slave.Close()
	out, _ := io.ReadAll(master) // EIO once the shell is gone
	_ = sh.Wait()
	os.Stdout.WriteString(strings.ReplaceAll(string(out), "\r\n", "\n"))
	return 0
}

// TestPrivatePty: a run opens a pty of its own (/dev/ptmx, /dev/pts) and
// runs a shell in it, as forkpty(3) does (Gemini's shell tool).
func TestPrivatePty(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{}, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Dir, cmd.Env = t.TempDir(), []string{"PATH=/usr/bin:/bin", ptyEnv + "=1"}
	if got, want := confinedOutput(t, s, cmd), "/dev/pts/0\nin a pty\n"; got != want {
		t.Errorf("the run printed %q, want %q (a pty of its own, its first)", got, want)
	}
}
