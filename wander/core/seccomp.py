"""The seccomp filter the sandbox (`wander.core.sandbox`) runs code under: a classic BPF program, handed to bwrap's
`--seccomp FD`, that refuses the system calls untrusted code has no use for and that widen the kernel surface it
reaches (docs/sandbox.md has the list and why each is there).

    program = filter_program()  # bytes: struct sock_filter[], as libseccomp's seccomp_export_bpf writes them

Refused calls fail with EPERM, as Docker's and Flatpak's default profiles refuse them; `clone3` fails with ENOSYS,
so the C library falls back to `clone`, whose flags a filter can read (clone3 passes them in memory it cannot):
`clone` asking for a new namespace is refused, a plain fork or thread is not. A call from another architecture's
table (x86-64's x32 ABI, 32-bit `int 0x80`) kills the process: its numbers mean other calls.
"""

from __future__ import annotations

import errno
import os
import struct

# The calls refused, by name: what each would give code that only computes (and why none is needed to compute).
REFUSED = (
    # reading or changing another process: its memory, its registers (a neighbour's, the sandbox's init)
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    # namespaces and mounts: a nested user namespace holds every capability inside it
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    # kernel subsystems with a long record of privilege escalations
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # the machine itself: modules, kexec, swap, clocks, the kernel log, accounting, host names, raw I/O
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "quotactl",
    "lookup_dcookie",
    "vhangup",
    "sethostname",
    "setdomainname",
    "iopl",
    "ioperm",
)

# System call numbers (the kernel's tables: arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h).
# fmt: off
X86_64 = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "unshare": 272,
    "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "swapon": 167, "swapoff": 168, "reboot": 169,
    "syslog": 103, "acct": 163, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "quotactl": 179, "lookup_dcookie": 212, "vhangup": 153, "sethostname": 170, "setdomainname": 171,
    "iopl": 172, "ioperm": 173, "clone": 56, "clone3": 435,
}
AARCH64 = {
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "unshare": 97,
    "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "init_module": 105,
    "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294,
    "open_by_handle_at": 265, "name_to_handle_at": 264, "swapon": 224, "swapoff": 225, "reboot": 142,
    "syslog": 116, "acct": 89, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
    "quotactl": 60, "lookup_dcookie": 18, "vhangup": 58, "sethostname": 161, "setdomainname": 162,
    "clone": 220, "clone3": 435,
}  # no iopl or ioperm on arm64
# fmt: on
# machine (os.uname) -> (AUDIT_ARCH_* of its native calls, its table, first number of a foreign ABI or None)
ARCHES = {"x86_64": (0xC000003E, X86_64, 0x40000000), "aarch64": (0xC00000B7, AARCH64, None)}

# The clone flags that ask for a new namespace (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET,
# NEWTIME).
NEW_NAMESPACE = (
    0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
)

# Classic BPF: instruction classes and fields, seccomp's return values, offsets in struct seccomp_data.
LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, KILL_PROCESS, ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
NR, ARCH, ARG0 = 0, 4, 16  # the call's number, its architecture, the low 32 bits of its first argument


class SeccompUnsupported(RuntimeError):
    """This machine's architecture has no table here."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes:
    """The filter for `machine` (os.uname().machine by default) as bytes bwrap's `--seccomp` reads."""
    machine = machine or os.uname().machine
    if machine not in ARCHES:
        raise SeccompUnsupported(
            f"no seccomp table for {machine!r}: the sandbox knows {', '.join(ARCHES)} "
            "(add the machine's system call numbers to wander/core/seccomp.py)"
        )
    audit_arch, table, foreign = ARCHES[machine]
    refuse = _op(RET, ERRNO | errno.EPERM)
    program = [_op(LD_W_ABS, ARCH), _op(JEQ, audit_arch, jt=1), _op(RET, KILL_PROCESS), _op(LD_W_ABS, NR)]
    if foreign is not None:
        program += [_op(JGE, foreign, jf=1), _op(RET, KILL_PROCESS)]
    for name in REFUSED:
        if name in table:
            program += [_op(JEQ, table[name], jf=1), refuse]
    program += [_op(JEQ, table["clone3"], jf=1), _op(RET, ERRNO | errno.ENOSYS)]
    # clone: refused when its flags (the first argument) ask for a namespace; allowed otherwise.
    program += [
        _op(JEQ, table["clone"], jf=3),
        _op(LD_W_ABS, ARG0),
        _op(JSET, NEW_NAMESPACE, jf=1),
        refuse,
        _op(RET, ALLOW),
    ]
    return b"".join(program)
