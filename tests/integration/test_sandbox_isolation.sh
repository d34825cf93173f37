#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a process inside a sandbox can see and do: identity, namespaces, capabilities, seccomp,
# the filesystem layout (/workspace is the host directory, /usr read-only, /tmp tmpfs, masked
# /proc files, no host secrets) and the writable root layer (ephemeral vs sticky).
# Every fact is read by tests/helpers/nook-probe or a plain tool inside the sandbox and, where
# it matters, checked again from the host.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR" "$NOOK_PROBE"
command -v jq >/dev/null || plan skip_all "jq is needed to read the probe's JSON"
plan 44

# Docker's default capability set minus CAP_NET_RAW: CHOWN DAC_OVERRIDE FOWNER FSETID KILL
# SETGID SETUID SETPCAP NET_BIND_SERVICE SYS_CHROOT MKNOD AUDIT_WRITE SETFCAP.
DEFAULT_CAPS=00000000a80405fb

# install_probe NAME: /workspace/probe in NAME, executable.
install_probe() {
        run_nook cp "$NOOK_PROBE" "$1:/workspace/probe"
        [[ $status == 0 ]] || return 1
        run_nook exec "$1" -- chmod 0755 /workspace/probe
        [[ $status == 0 ]]
}

# jfield JSON FILTER: one value from the probe's JSON ('' when absent or not JSON).
jfield() { jq -r "$2 // empty" <<<"$1" 2>/dev/null; }

# init_pid NAME: host pid of NAME's nook-init (the supervisor's child called nook-init).
init_pid() {
        local sup
        sup=$("$NOOK" inspect "$1" 2>/dev/null | jq -r '.supervisorPid // empty')
        [[ -n "$sup" ]] || return 1
        ps -o pid=,comm= --ppid "$sup" | awk '$2 == "nook-init" { print $1; exit }'
}

# ---- identity and namespaces -------------------------------------------------------------
run_nook create iso
is "$status" 0 "create iso" || true
install_probe iso
check "the probe is installed and executable in iso" test "$status" = 0

run_nook exec iso -- /workspace/probe id
is "$(jfield "$out" .hostname)" "iso" "the hostname inside is the sandbox name"
is "$(jfield "$out" .uid):$(jfield "$out" .euid):$(jfield "$out" .gid)" "0:0:0" "uid, euid and gid are 0 inside"

pid1=$(init_pid iso)
if [[ -z "$pid1" ]]; then
        not_ok "the sandbox's nook-init runs on the host under the expected uid" "no nook-init child of the supervisor"
else
        host_uid=$(ps -o uid= -p "$pid1" | tr -d ' ')
        if nook_idmapped; then
                ok_range=no
                ((host_uid >= 100065536 && (host_uid - 100065536) % 65536 == 0)) && ok_range=yes
                is "$ok_range" yes "rootful: sandbox root ($host_uid) is the base of a range of the pool from 100065536 (ps of nook-init)"
        elif nook_rootful; then
                is "$host_uid" 100000000 "rootful: sandbox root is host uid 100000000 (ps of nook-init)"
        else
                is "$host_uid" "$(id -u)" "rootless: sandbox root is the caller's uid (ps of nook-init)"
        fi
fi

run_nook exec iso -- cat /proc/1/comm
is "$out" "nook-init" "PID 1 inside is nook-init"

# The command's own pid is small: it lives in a new pid namespace.
run_nook exec iso -- /workspace/probe id
pid_in=$(jfield "$out" .pid)
if [[ "$pid_in" =~ ^[0-9]+$ && $pid_in -lt 1000 ]]; then ok "the command runs in a new pid namespace (pid $pid_in)"; else not_ok "the command runs in a new pid namespace" "pid: '$pid_in'"; fi

run_nook exec iso -- /workspace/probe net
is "$(jq -r '[.interfaces[].name] | join(",")' <<<"$out" 2>/dev/null)" "lo" "the only network interface is lo"

# Namespaces differ from the host's (compare the inode of every ns link with ours).
host_ns=$(for n in user mnt pid uts ipc net cgroup; do printf '%s=%s\n' "$n" "$(readlink /proc/self/ns/$n)"; done)
run_nook exec iso --sh 'for n in user mnt pid uts ipc net cgroup; do printf "%s=%s\n" $n $(readlink /proc/self/ns/$n); done'
same=$(comm -12 <(sort <<<"$host_ns") <(sort <<<"$out"))
if [[ $status == 0 && $(wc -l <<<"$out") == 7 && -z "$same" ]]; then
        ok "user, mnt, pid, uts, ipc, net and cgroup namespaces are all new"
else
        not_ok "user, mnt, pid, uts, ipc, net and cgroup namespaces are all new" "shared with the host: $same" "inside: $out"
fi

# ---- capabilities, no_new_privs, seccomp ---------------------------------------------------
run_nook exec iso -- /workspace/probe caps
is "$(jfield "$out" .CapEff)" "$DEFAULT_CAPS" "CapEff is docker's default set minus NET_RAW"
is "$(jfield "$out" .CapBnd)" "$DEFAULT_CAPS" "CapBnd is the same set"
is "$(jfield "$out" .CapAmb)" "0000000000000000" "no ambient capabilities"
is "$(jfield "$out" .NoNewPrivs)" "1" "NoNewPrivs is 1"
is "$(jfield "$out" .Seccomp)" "2" "a seccomp filter is loaded (Seccomp 2)"

denied_default="keyctl add_key bpf perf_event_open mount pivot_root fsopen swapon reboot kexec_load init_module open_by_handle_at userfaultfd clock_settime personality-unsafe io_uring_setup syslog acct iopl quotactl ioctl-tiocsti"
run_nook exec iso -- /workspace/probe try-syscall $denied_default
bad=$(jq -r 'to_entries[] | select(.value != "EPERM") | "\(.key)=\(.value)"' <<<"$out" 2>/dev/null | tr '\n' ' ')
if [[ $status == 0 && -n "$out" && -z "$bad" ]]; then ok "default profile: $denied_default all fail with EPERM"; else not_ok "default profile: dangerous syscalls fail with EPERM" "not EPERM: $bad" "out: $out"; fi
run_nook exec iso -- /workspace/probe try-syscall getpid clone personality
is "$out" '{"getpid":"ok","clone":"ok","personality":"ok"}' "default profile: ordinary syscalls work"

run_nook create --security restricted isr
install_probe isr
run_nook exec isr -- /workspace/probe try-syscall ptrace unshare-user clone-newuser mount setns process_vm_readv keyctl bpf chroot
bad=$(jq -r 'to_entries[] | select(.value != "EPERM") | "\(.key)=\(.value)"' <<<"$out" 2>/dev/null | tr '\n' ' ')
if [[ $status == 0 && -n "$out" && -z "$bad" ]]; then ok "restricted profile: ptrace, unshare-user, mount, setns... fail with EPERM"; else not_ok "restricted profile: ptrace, unshare-user, mount, setns... fail with EPERM" "not EPERM: $bad" "out: $out"; fi
run_nook exec isr -- /workspace/probe caps
eff=$(jfield "$out" .CapEff)
if [[ -n "$eff" ]] && (((16#$eff & ~16#$DEFAULT_CAPS) == 0)) && [[ $eff != "$DEFAULT_CAPS" ]]; then
        ok "restricted profile: CapEff ($eff) is a strict subset of the default set"
else
        not_ok "restricted profile: CapEff is a strict subset of the default set" "CapEff: '$eff'"
fi
run_nook rm isr

# ---- filesystem: what is hidden ------------------------------------------------------------
run_nook exec iso -- cat /etc/shadow
isnt "$status" 0 "/etc/shadow cannot be read inside"
run_nook exec iso --sh 'test -e /etc/shadow && echo present || echo absent'
is "$out" "absent" "/etc/shadow does not exist inside"

# Host /home and /root: nothing of theirs shows through.
host_home=$(ls -A /home 2>/dev/null | head -n 20 | sort)
run_nook exec iso -- ls -A /home
if [[ $status == 0 && -z "$out" ]]; then ok "/home inside is empty (host has: ${host_home//$'\n'/ })"; else not_ok "/home inside is empty" "status $status, inside: $out"; fi
run_nook exec iso -- ls -A /root
if [[ $status == 0 && -z "$out" ]]; then ok "/root inside is empty"; else not_ok "/root inside is empty" "status $status, inside: $out"; fi

# Masked /proc files: each one the host has reads empty inside (or does not exist).
masked_ok=1 masked_seen=""
for f in /proc/kcore /proc/keys /proc/timer_list /proc/sched_debug /proc/sysrq-trigger; do
        [[ -e $f ]] || continue
        masked_seen+="$f "
        run_nook exec iso --sh "test -e $f || exit 0; test \$(head -c 64 $f 2>/dev/null | wc -c) = 0"
        [[ $status == 0 ]] || { masked_ok=0; diag "$f is readable inside"; }
done
if [[ -z "$masked_seen" ]]; then
        not_ok "masked /proc files read empty inside" "the host has none of them?"
elif [[ $masked_ok == 1 ]]; then
        ok "masked /proc files read empty inside: $masked_seen"
else
        not_ok "masked /proc files read empty inside: $masked_seen"
fi
if [[ -e /proc/kcore ]]; then
        run_nook exec iso --sh 'test ! -e /proc/kcore || test -c /proc/kcore || test ! -s /proc/kcore'
        is "$status" 0 "/proc/kcore is masked (absent, a device node or empty)"
else
        skip_expected "/proc/kcore: this kernel has none (the other masked files are checked above)"
fi
run_nook exec iso --sh 'echo 1 > /proc/sys/kernel/sysrq'
isnt "$status" 0 "/proc/sys is read-only inside"
run_nook exec iso --sh 'touch /sys/nook-x'
isnt "$status" 0 "/sys is read-only inside"

# ---- filesystem: /workspace, /usr, /tmp ----------------------------------------------------
ws=$("$NOOK" ws path iso 2>/dev/null)
check "nook ws path names an existing host directory" test -n "$ws" -a -d "$ws"
run_nook exec iso -- /workspace/probe write /workspace/from-inside "inside-$$"
is "$(cat "$ws/from-inside" 2>/dev/null)" "inside-$$" "a write to /workspace inside is a write to the host workspace"
printf 'host-%s' "$$" >"$ws/from-host"
run_nook exec iso -- cat /workspace/from-host
is "$out" "host-$$" "a host write to the workspace is visible at /workspace inside"

run_nook exec iso --sh 'echo x > /usr/nook-probe-test'
isnt "$status" 0 "writing under /usr fails"
like "$err" "Read-only file system" "...with 'Read-only file system'"
check "nothing appeared in the host /usr" test ! -e /usr/nook-probe-test

run_nook exec iso -- /workspace/probe mounts
is "$(jq -r '.mounts[] | select(.target == "/tmp") | .fstype' <<<"$out" 2>/dev/null)" "tmpfs" "/tmp is a tmpfs"
is "$(jq -r '.mounts[] | select(.target == "/usr") | .ro' <<<"$out" 2>/dev/null)" "true" "/usr is mounted read-only"
is "$(jq -r '[.mounts[] | select(.nosuid != true and .fstype != "devtmpfs") | .target] | join(" ")' <<<"$out" 2>/dev/null)" "" \
        "every mount is nosuid (except device-node binds from devtmpfs)"

# ---- the writable root layer: /etc ---------------------------------------------------------
marker="nook-marker-$$"
run_nook exec iso --sh "echo $marker > /etc/$marker && cat /etc/$marker"
is "$out" "$marker" "a write to /etc succeeds inside"
check "...and does not reach the host /etc" test ! -e "/etc/$marker"
run_nook stop iso
run_nook start iso
run_nook exec iso -- cat "/etc/$marker"
isnt "$status" 0 "ephemeral: the /etc write is gone after stop and start"
check "ephemeral: the workspace survives stop and start" test -f "$ws/from-inside"

run_nook create --sticky sticky
run_nook exec sticky --sh "echo $marker > /etc/$marker"
run_nook stop sticky
run_nook start sticky
run_nook exec sticky -- cat "/etc/$marker"
is "$out" "$marker" "sticky: the /etc write survives stop and start"
run_nook inspect sticky
is "$(jq -r .persistence <<<"$out" 2>/dev/null)" "sticky" "inspect reports persistence sticky"

# init starts on the supervisor's other CPUs and takes the whole mask back (sup.c:start_off_our_cpu):
# what the guest runs may use every CPU the creating process may, exec'd or run
host_cpus=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
run_nook exec iso --sh 'grep Cpus_allowed_list /proc/1/status /proc/self/status | cut -f2 | sort -u'
is "$out" "$host_cpus" "init and an exec may use every CPU the host process may ($host_cpus)"
run_nook run -- awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status
is "$out" "$host_cpus" "so may nook run's command"

run_nook rm sticky
run_nook rm iso
is "$(ls -A "$NOOK_HOME/sandboxes" "$NOOK_HOME/workspaces" 2>/dev/null | grep -v ':$' | grep -v '^$')" "" "rm left no sandbox or workspace directory"
