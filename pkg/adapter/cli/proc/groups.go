package proc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrStateDir is returned when the directory of process-group records
// cannot be used: it cannot be created, is not a directory, is not owned by
// this user, or others may write to it (a record there decides what Reap
// kills).
var ErrStateDir = errors.New("process group state directory")

// DefaultStateDir is where a runner records the process groups of its
// children when the operator names no directory:
// <user cache dir>/agentmesh/process-groups, or
// <temp dir>/agentmesh-<uid>/process-groups when there is no cache
// directory (no HOME). It must be local to the host: the records name pids.
func DefaultStateDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "agentmesh", "process-groups")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("agentmesh-%d", os.Geteuid()), "process-groups")
}

// groupRecord is one live process group a process started, in
// <state dir>/<owner>/<pgid>.json, where <owner> is the starting process's
// identity (see ownerName). A pid alone is not an identity (pids are
// reused), so the leader's start time and the boot it started in go with it.
type groupRecord struct {
	PGID   int    `json:"pgid"`
	Start  uint64 `json:"start"` // the leader's start time in clock ticks after boot (/proc/<pid>/stat field 22)
	Boot   string `json:"boot"`  // /proc/sys/kernel/random/boot_id
	Binary string `json:"binary"`
}

// identity is a process's pid, start time and boot.
type identity struct {
	pid   int
	start uint64
	boot  string
}

// self is this process's identity; ok is false where /proc cannot be read,
// and then nothing is recorded.
var self = sync.OnceValues(func() (identity, bool) {
	st, ok := readStat(os.Getpid())
	if !ok {
		return identity{}, false
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return identity{}, false
	}
	return identity{pid: st.pid, start: st.start, boot: strings.TrimSpace(string(b))}, true
})

// ownerName is the name of id's directory of records: <boot>_<pid>_<start>.
func ownerName(id identity) string { return fmt.Sprintf("%s_%d_%d", id.boot, id.pid, id.start) }

func parseOwner(name string) (identity, bool) {
	f := strings.Split(name, "_")
	if len(f) != 3 {
		return identity{}, false
	}
	pid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 || f[0] == "" {
		return identity{}, false
	}
	return identity{pid: pid, start: start, boot: f[0]}, true
}

// record writes the record of the group led by pgid, which this process has
// just started, and returns its path; "" with a nil error where /proc
// cannot be read. The record is written to a temporary name and renamed,
// so a reaper never reads half of one.
func record(dir string, pgid int, binary string) (string, error) {
	me, ok := self()
	if !ok {
		return "", nil
	}
	st, ok := readStat(pgid)
	if !ok {
		// Reaped already? Not by us: we are its parent and have not
		// waited. Without its start time the group cannot be named safely.
		return "", fmt.Errorf("read /proc/%d/stat of the new child", pgid)
	}
	owner := filepath.Join(dir, ownerName(me))
	if err := os.MkdirAll(owner, 0o700); err != nil {
		return "", err
	}
	b, err := json.Marshal(groupRecord{PGID: pgid, Start: st.start, Boot: me.boot, Binary: binary})
	if err != nil {
		return "", err
	}
	path := filepath.Join(owner, strconv.Itoa(pgid)+".json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return path, nil
}

// Reaped is one process group Reap found left behind.
type Reaped struct {
	// PGID is the group's id, its leader's pid.
	PGID int
	// Binary is what its leader ran.
	Binary string
	// Owner is the pid of the dead process that started it.
	Owner int
	// Killed: members of the group were still running and were sent
	// SIGKILL. False when the group had already ended.
	Killed bool
	// Left: some member still ran killWait after the SIGKILL (a process in
	// uninterruptible sleep dies only when it wakes); its record is kept
	// for the next Reap.
	Left bool
}

// Reap ends the process groups that processes no longer running recorded
// in dir, their children's groups that outlived them, and removes their
// records. A runner calls it once at start, before it takes work, with the
// StateDir its adapters' Specs name.
//
// A group is killed (SIGKILL, at once: its runner is gone and the run may
// already be running elsewhere) only if it can be shown to be the recorded
// one: its leader runs with the recorded start time in the recorded boot,
// or the leader is gone and every process still in the group started no
// earlier than it did. A group whose leader pid now runs something else
// ended long ago (Linux reuses no pid that is still a group id). Records of
// live processes (another runner on the host, or this one) are left alone.
//
// Reap creates dir (0700) if needed; a dir not owned by this user or
// writable by others is an ErrStateDir. It blocks until each killed group
// is gone or killWait has passed, and is safe to call concurrently with
// Stream.
func Reap(dir string) ([]Reaped, error) {
	if err := checkStateDir(dir); err != nil {
		return nil, err
	}
	me, ok := self()
	if !ok {
		return nil, nil // no /proc: nothing was recorded
	}
	owners, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStateDir, err)
	}
	var out []Reaped
	var errs []error
	for _, o := range owners {
		id, ok := parseOwner(o.Name())
		if !ok || !o.IsDir() || id == me || alive(id, me.boot) {
			continue
		}
		odir := filepath.Join(dir, o.Name())
		recs, err := os.ReadDir(odir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		kept := 0
		for _, e := range recs {
			path := filepath.Join(odir, e.Name())
			if !strings.HasSuffix(e.Name(), ".json") {
				_ = os.Remove(path) // a record its owner died writing
				continue
			}
			b, err := os.ReadFile(path)
			var rec groupRecord
			if err == nil {
				err = json.Unmarshal(b, &rec)
			}
			if err != nil || rec.PGID <= 0 {
				errs = append(errs, fmt.Errorf("process group record %s: %v", path, err))
				kept++
				continue
			}
			r := Reaped{PGID: rec.PGID, Binary: rec.Binary, Owner: id.pid}
			if rec.Boot == me.boot {
				r.Killed, r.Left = reapGroup(rec)
			}
			if r.Left {
				kept++
			} else {
				_ = os.Remove(path)
			}
			if r.Killed || r.Left {
				out = append(out, r)
			}
		}
		if kept == 0 {
			_ = os.Remove(odir)
		}
	}
	return out, errors.Join(errs...)
}

func checkStateDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: no directory named", ErrStateDir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: %v", ErrStateDir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStateDir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrStateDir, dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s is owned by uid %d, not this user (%d)", ErrStateDir, dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by others (mode %v)", ErrStateDir, dir, fi.Mode().Perm())
	}
	return nil
}

// alive reports whether the process id names still runs.
func alive(id identity, boot string) bool {
	if id.boot != boot {
		return false
	}
	st, ok := readStat(id.pid)
	return ok && st.start == id.start && !st.dead()
}

// reapGroup SIGKILLs the group rec names if it is still the recorded one
// and waits for it to be gone.
func reapGroup(rec groupRecord) (killed, left bool) {
	pgid := rec.PGID
	leader, ok := readStat(pgid)
	switch {
	case ok && leader.start == rec.Start:
		// Our leader, even if it has left its group since: kill it by pid,
		// and the group (pid pgid is in use, so the group is its).
		if leader.dead() && !memberAlive(pgid, rec.Start) {
			return false, false
		}
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	case ok:
		return false, false // the pid runs something else: our group ended
	default:
		members, ours := groupMembers(pgid, rec.Start)
		if !ours || members == 0 {
			return false, false
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(killWait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if l, ok := readStat(pgid); (!ok || l.start != rec.Start || l.dead()) && !memberAlive(pgid, rec.Start) {
			return true, false
		}
	}
	return true, true
}

// memberAlive reports whether a process of group pgid that started no
// earlier than start still runs.
func memberAlive(pgid int, start uint64) bool {
	n, _ := groupMembers(pgid, start)
	return n > 0
}

// groupMembers counts the live (not zombie) processes of group pgid; ours
// is false if one of them started before start, so the group cannot be the
// one recorded.
func groupMembers(pgid int, start uint64) (n int, ours bool) {
	ours = true
	forEachStat(func(st stat) bool {
		if st.pgrp != pgid || st.dead() {
			return true
		}
		if st.start < start {
			ours = false
			return false
		}
		n++
		return true
	})
	return n, ours
}

// stat is what we read of /proc/<pid>/stat.
type stat struct {
	pid     int
	state   byte
	pgrp    int
	threads int
	start   uint64
}

// dead reports whether the process can no longer run: a zombie (even one
// whose other threads still run counts as running) or being torn down.
func (s stat) dead() bool { return (s.state == 'Z' || s.state == 'X') && s.threads <= 1 }

func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	return parseStat(pid, b)
}

// parseStat parses "pid (comm) state ppid pgrp ...". comm may hold spaces
// and parentheses, so fields are counted from the last ')'.
func parseStat(pid int, b []byte) (stat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, false
	}
	s := stat{pid: pid, state: f[0][0]}
	var err error
	if s.pgrp, err = strconv.Atoi(f[2]); err != nil {
		return stat{}, false
	}
	if s.threads, err = strconv.Atoi(f[17]); err != nil {
		return stat{}, false
	}
	if s.start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return stat{}, false
	}
	return s, true
}

// forEachStat calls fn with every process's stat until fn returns false; it
// reports false if /proc cannot be read.
func forEachStat(fn func(stat) bool) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(pid)
		if !ok {
			continue // gone meanwhile
		}
		if !fn(st) {
			break
		}
	}
	return true
}
