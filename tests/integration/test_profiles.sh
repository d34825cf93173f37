#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Security profiles (issue 6, README's table, docs/design/security.md), asserted from inside a
# sandbox with nook-probe: capability sets per profile (root and non-root execs), no_new_privs,
# seccomp filter mode, each profile's denied syscalls (EPERM; clone3 ENOSYS in restricted) and
# the ones it must leave alone, masked /proc paths, read-only /proc/sys and /sys, nosuid/nodev
# on user mounts in restricted.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_PROBE"
plan 124

# Capability masks (linux/capability.h bit numbers):
#   default    CHOWN 0 DAC_OVERRIDE 1 FOWNER 3 FSETID 4 KILL 5 SETGID 6 SETUID 7 SETPCAP 8
#              NET_BIND_SERVICE 10 SYS_CHROOT 18 MKNOD 27 AUDIT_WRITE 29 SETFCAP 31
#   restricted default minus SETPCAP, SYS_CHROOT, MKNOD, AUDIT_WRITE, SETFCAP
CAPS_DEFAULT=00000000a80405fb
CAPS_RESTRICTED=00000000000004fb
ZERO=0000000000000000

# Denied by both profiles (EPERM)
DENY_BOTH="keyctl add_key bpf perf_event_open userfaultfd io_uring_setup kexec_load init_module
        swapon reboot clock_settime open_by_handle_at syslog acct iopl quotactl ioctl-tiocsti
        personality-unsafe"
# Denied by restricted only (EPERM), and what default gives instead
declare -A DEFAULT_GIVES=(
        [ptrace]=ESRCH [process_vm_readv]=EINVAL [setns]=EBADF [unshare-user]=ok
        [clone-newuser]=ok [name_to_handle_at]='(EOPNOTSUPP|EFAULT|EINVAL)' [personality]=ok
        [chroot]=ok [umount2]=ENOENT)
RESTRICTED_ONLY="${!DEFAULT_GIVES[*]} mount pivot_root fsopen"

D=$(mktemp -d /tmp/nook-test-prof.XXXXXXXX) || bail_out mktemp
chmod 0755 "$D"
trap 'rc=$?; rm -rf "$D"; (exit $rc); _tap_finish' EXIT

for prof in default restricted; do
        sb=prof-$prof
        run_nook create --security "$prof" --tmpfs /mnt/t:8m -v "$D:/mnt/b:rw" "$sb"
        is "$status" 0 "create --security $prof" || bail_out "create $prof: $err"
        run_nook cp "$NOOK_PROBE" "$sb:/workspace/probe"
        run_nook exec "$sb" -- chmod 0755 /workspace/probe
        P=/workspace/probe
        want=$CAPS_DEFAULT
        [[ $prof == restricted ]] && want=$CAPS_RESTRICTED

        # ---- capabilities, no_new_privs, seccomp -------------------------------------------
        run_nook exec "$sb" -- $P caps
        c=$out
        like "$c" "\"CapEff\":\"$want\"" "$prof: root exec's effective set is the profile's ($want)"
        like "$c" "\"CapPrm\":\"$want\"" "$prof: permitted set is the profile's"
        like "$c" "\"CapBnd\":\"$want\"" "$prof: bounding set is the profile's"
        like "$c" "\"CapInh\":\"$ZERO\"" "$prof: inheritable set is empty"
        like "$c" "\"CapAmb\":\"$ZERO\"" "$prof: ambient set is empty"
        like "$c" '"NoNewPrivs":1' "$prof: NoNewPrivs is 1"
        like "$c" '"Seccomp":2' "$prof: a seccomp filter is loaded (mode 2)"
        run_nook exec --user 1000 "$sb" -- $P caps
        if ! nook_rootful && [[ $err == *"only map root"* ]]; then
                # nook maps only the caller's uid when rootless (no newuidmap range in use)
                skip_expected "$prof: a non-root exec: this rootless sandbox maps only root"
                skip_expected "$prof: a non-root exec: this rootless sandbox maps only root"
        else
                like "$out" "\"CapEff\":\"$ZERO\".*\"CapBnd\":\"$want\"" \
                        "$prof: a non-root exec has no effective caps and the same bounding set"
                like "$out" '"NoNewPrivs":1,"Seccomp":2' "$prof: a non-root exec has NoNewPrivs and seccomp too"
        fi

        # ---- syscalls --------------------------------------------------------------------------
        run_nook exec "$sb" -- $P try-syscall
        t=$out
        like "$t" '"getpid":"ok"' "$prof: getpid works (the filter is a deny list)"
        like "$t" '"clone":"ok"' "$prof: a plain clone works"
        for s in $DENY_BOTH; do
                like "$t" "\"$s\":\"EPERM\"" "$prof: $s is denied with EPERM"
        done
        if [[ $prof == default ]]; then
                for s in "${!DEFAULT_GIVES[@]}"; do
                        like "$t" "\"$s\":\"${DEFAULT_GIVES[$s]}\"" "default: $s is not filtered (${DEFAULT_GIVES[$s]})"
                done
                like "$t" '"clone3":"EINVAL"' "default: clone3 reaches the kernel (EINVAL)"
                like "$t" '"mount":"EPERM"' "default: mount fails (no CAP_SYS_ADMIN)"
        else
                for s in $RESTRICTED_ONLY; do
                        like "$t" "\"$s\":\"EPERM\"" "restricted: $s is denied with EPERM"
                done
                like "$t" '"clone3":"ENOSYS"' "restricted: clone3 gives ENOSYS (glibc falls back to clone)"
        fi

        # ---- /proc and /sys --------------------------------------------------------------------
        run_nook exec "$sb" -- $P mounts
        m=$out
        for p in /proc/kcore /proc/keys /proc/timer_list /proc/sysrq-trigger /proc/latency_stats \
                /proc/sched_debug /proc/scsi /proc/acpi /sys/firmware; do
                if [[ -e $p ]]; then
                        like "$m" "\"target\":\"$p\"" "$prof: $p is masked (a mount over it)"
                else
                        ok "$prof: $p is absent on this kernel, nothing to mask"
                fi
        done
        run_nook exec "$sb" -- $P read /proc/keys
        like "$out" '"content":""' "$prof: /proc/keys reads empty"
        like "$m" '"target":"/proc/sys","fstype":"proc","source":"[^"]*","options":"ro[,"]' "$prof: /proc/sys is read-only"
        like "$m" '"target":"/sys","fstype":"sysfs","source":"[^"]*","options":"ro[,"]' "$prof: /sys is read-only"
        run_nook exec "$sb" -- $P write /proc/sys/kernel/hostname evil
        like "$out" '"error":"E(ROFS|PERM|ACCES)"' "$prof: a write under /proc/sys fails"
        run_nook exec "$sb" -- $P write /sys/kernel/nook-probe x
        like "$out" '"error":"E(ROFS|PERM|ACCES)"' "$prof: a write under /sys fails"
        for t in /mnt/t /mnt/b /workspace; do
                like "$m" "\"target\":\"$t\",[^}]*\"nosuid\":true,\"nodev\":true" "$prof: $t is nosuid,nodev"
        done
        run_nook rm "$sb"
done

# The supervisor parses the profile once, when it reads its config, and refuses one it does not
# know there (init uses the parsed value).  A supervisor wrapper rewrites the config libnook sends
# (a socket at fd 6: nook-supervisor --state DIR --run RUNDIR --config-fd 6 ...).
fake=$(mktemp /var/tmp/nook-fake-sup.XXXXXX)
cat >"$fake" <<SH
#!/bin/sh
# the real supervisor, over a config naming a profile nobody knows
[ "\$5" = --config-fd ] && [ "\$6" = 6 ] || exit 99
t=\$(mktemp /var/tmp/nook-fake-cfg.XXXXXX) || exit 98
jq -c '.profile = "bogus"' <&6 >"\$t" || exit 97
exec 6<"\$t"
rm -f "\$t"
exec "$NOOK_SUPERVISOR" "\$@"
SH
chmod 0755 "$fake"
NOOK_SUPERVISOR=$fake run_nook create badprof
isnt "$status" 0 "a config with an unknown security profile fails the create"
like "$err" "unknown security profile 'bogus'" "the create's error names the unknown profile"
is "$(ls -A "$NOOK_HOME/sandboxes" 2>/dev/null)" "" "the refused create leaves no state"
# a config that is not JSON at all (hostile or truncated): refused, named, nothing left
cat >"$fake" <<SH
#!/bin/sh
[ "\$5" = --config-fd ] && [ "\$6" = 6 ] || exit 99
t=\$(mktemp /var/tmp/nook-fake-cfg.XXXXXX) || exit 98
head -c 20 <&6 >"\$t" || exit 97
exec 6<"\$t"
rm -f "\$t"
exec "$NOOK_SUPERVISOR" "\$@"
SH
NOOK_SUPERVISOR=$fake run_nook create badcfg
isnt "$status" 0 "a truncated (not JSON) config fails the create"
like "$err" "Cannot read the sandbox config \\(fd 6\\)" "the create's error says the config could not be read"
is "$(ls -A "$NOOK_HOME/sandboxes" 2>/dev/null)/$(ls -A "$NOOK_HOME/workspaces" 2>/dev/null)" "/" \
        "the refused create leaves no state folder and no workspace"
rm -f "$fake"
