package sandbox

import (
	"fmt"
	"sync"

	"github.com/agentmesh/agentmesh/pkg/sandbox/sandboxinit"
	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// A run's system calls pass a seccomp filter the init installs on the
// CLI just before its exec: a deny list modelled on Docker's default
// profile (the calls it allows only with a capability a run has not, the
// new mount API and io_uring added), each refused with EPERM. The runner
// assembles it once (go-seccomp-bpf, pure Go) and sends it in the init's
// config, so that the init stays small.

// deniedSyscalls are refused with EPERM whatever their arguments. A name
// this architecture lacks is left out.
var deniedSyscalls = []string{
	// the kernel's keyrings, shared by every process of a uid
	"add_key", "keyctl", "request_key",
	// tracing and kernel programs
	"bpf", "perf_event_open", "userfaultfd", "lookup_dcookie", "kcmp", "process_vm_readv", "process_vm_writev",
	// the mount family, old and new
	"mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
	"fspick", "mount_setattr", "open_by_handle_at", "name_to_handle_at", "quotactl", "quotactl_fd",
	// namespaces entered
	"setns",
	// the kernel itself, its modules, swap, time and log
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "create_module", "get_kernel_syms",
	"query_module", "swapon", "swapoff", "reboot", "acct", "settimeofday", "stime", "clock_settime", "clock_adjtime",
	"adjtimex", "syslog", "iopl", "ioperm", "vhangup", "uselib", "ustat", "sysfs", "_sysctl", "nfsservctl", "vm86", "vm86old",
	// io_uring, whose operations no filter sees
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// newNamespaces are the clone and unshare flags that make a namespace.
const newNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID |
	unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// personalities are the personality(2) values Docker allows: the
// default, UNAME26, ADDR_NO_RANDOMIZE's combinations and the query.
var personalities = []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// seccompFilter is the filter's program, assembled once.
var seccompFilter = sync.OnceValues(func() ([]sandboxinit.BPF, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %v", err)
	}
	var names []string
	for _, n := range deniedSyscalls {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	nsFlags := seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: newNamespaces}}
	var otherPersonality seccomp.ArgumentConditions
	for _, p := range personalities {
		otherPersonality = append(otherPersonality, seccomp.Condition{Argument: 0, Operation: seccomp.NotEqual, Value: p})
	}
	p := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{
		{Action: seccomp.ActionErrno, Names: names, NamesWithCondtions: []seccomp.NameWithConditions{
			{Name: "unshare", Conditions: nsFlags},
			{Name: "clone", Conditions: nsFlags},
			{Name: "personality", Conditions: otherPersonality},
		}},
		// clone3's flags are in memory no filter reads: ENOSYS, so that
		// libc falls back to clone, whose flags are checked (as Docker).
		{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
	}}
	prog, err := p.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %v", err)
	}
	// A call of another architecture (i386's int 0x80 on x86_64) would
	// reach the policy's default: it is refused first.
	head := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS)},
	}
	raw, err := bpf.Assemble(append(head, prog...))
	if err != nil {
		return nil, fmt.Errorf("seccomp: %v", err)
	}
	out := make([]sandboxinit.BPF, len(raw))
	for i, r := range raw {
		out[i] = sandboxinit.BPF{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
})
