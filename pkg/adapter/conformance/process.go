package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// survivor describes pid if it can still run, or returns "". A pid kill(2)
// no longer finds is gone; so is a zombie (state Z or X in
// /proc/<pid>/stat): an orphaned grandchild stays one for good under an
// init that does not reap, but it can no longer do anything.
func survivor(pid int) string {
	if pid <= 0 {
		return ""
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return ""
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "" // gone between the two looks
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return fmt.Sprintf("pid %d: unreadable /proc stat %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
		return ""
	}
	state := "?"
	if len(f) > 0 {
		state = f[0]
	}
	return fmt.Sprintf("pid %d is still running (state %s)", pid, state)
}
