#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CLI's own surface: help, version, unknown commands, name rules. Needs no sandbox.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 24

run_nook --help
is "$status" 0 "nook --help exits 0"
like "$out" "(^|[[:space:]])run([[:space:]]|$)" "nook --help lists the run command"

run_nook --version
is "$status" 0 "nook --version exits 0"
like "$out" "[0-9]+\.[0-9]+\.[0-9]+" "nook --version prints a version number"

expect_fail 2 "an unknown command is a usage error" frobnicate-xyz
like "$err" "frobnicate-xyz" "the error names the unknown command"

# Hostile sandbox names are refused by the name rule before anything touches the disk.
for name in "../x" "A" ""; do
        run_nook ws path "$name"
        if [[ $status != 0 && $status != 124 ]]; then
                ok "nook ws path '$name' is refused"
        else
                not_ok "nook ws path '$name' is refused" "status: $status" "stdout: $out"
        fi
        like "$err" "name must be" "the refusal of '$name' states the name rule"
done
is "$(find "$NOOK_HOME" -mindepth 1 -path "$NOOK_HOME/workspaces/*" 2>/dev/null)" "" \
        "refused names created no workspace"

# libcurl, libarchive and libcrypto are linked by the image module, libnook-image.so, which
# libnook loads on first use only (src/image/module.h): a command that pulls nothing maps none
# of them (LD_DEBUG lists every object the dynamic linker loads).
LD_DEBUG=files "$NOOK" ls >/dev/null 2>"$NOOK_HOME/ld.txt"
is "$(grep -oE 'file=[^ ]*(libcurl|libarchive|libcrypto)[^ ]*' "$NOOK_HOME/ld.txt" | sort -u)" "" \
        "nook ls loads neither libcurl, libarchive nor libcrypto"
grep -q "file=libsqlite3" "$NOOK_HOME/ld.txt" && ok "LD_DEBUG saw the libraries nook ls does load" ||
        not_ok "LD_DEBUG saw the libraries nook ls does load" "$(head -5 "$NOOK_HOME/ld.txt")"
is "$(grep -oE 'file=[^ ]*libnook-image[^ ]*' "$NOOK_HOME/ld.txt" | sort -u)" "" "nook ls does not load the image module"
# A command that needs the image store loads the module, and with it libarchive.
LD_DEBUG=files "$NOOK" image inspect no-such-image-xyz >/dev/null 2>"$NOOK_HOME/ld.txt"
grep -qE 'file=[^ ]*libnook-image\.so.*generating link map' "$NOOK_HOME/ld.txt" &&
        grep -qE 'file=libarchive' "$NOOK_HOME/ld.txt" && ok "nook image inspect loads the image module and libarchive" ||
        not_ok "nook image inspect loads the image module and libarchive" "$(grep -E 'libnook|libarch' "$NOOK_HOME/ld.txt" | head -5)"
# A missing module is a broken installation, said as such (not a crash without a word).  It
# aborts on purpose: no core file.
ulimit -c 0
NOOK_IMAGE_MODULE=/nonexistent/libnook-image.so run_nook image inspect no-such-image-xyz
[[ $status != 0 ]] && ok "a missing image module fails the command" || not_ok "a missing image module fails the command" "status 0"
like "$err" "cannot load /nonexistent/libnook-image.so.*install the 'nook' package" "the error names the module and what to do"

# stderr is unbuffered: an error line must go out in one write(2), or the lines of nook processes
# sharing a log interleave (each byte was once a write of its own).  With stderr on a
# SOCK_SEQPACKET socket every write(2) arrives as one record.  records_match WHICH REGEX ARGS...:
# record WHICH (1-based; 0: there must be exactly one) matches the Python REGEX in full.
records_match() {
        python3 - "$@" <<'PY'
import re, socket, subprocess, sys
which, regex, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=b)
b.close()
recs = []
while True:
    r = a.recv(1 << 16)
    if not r:
        break
    recs.append(r.decode("utf-8", "replace"))
p.wait()
good = (len(recs) == 1 if which == 0 else len(recs) >= which)
if good and re.fullmatch(regex, recs[max(which, 1) - 1], re.S):
    sys.exit(0)
print("%d records: %r" % (len(recs), recs[:8]))
sys.exit(1)
PY
}
one_record() { # what, which record (0: the only one), regex, nook args...
        local what=$1 which=$2 re=$3 why
        shift 3
        if why=$(records_match "$which" "$re" "$NOOK" "$@"); then
                ok "$what: one write(2)"
        else
                not_ok "$what: one write(2)" "$why"
        fi
}
one_record "an unknown command" 0 "nook: unknown command 'frobnicate-xyz'.*for the list of commands\.\n" frobnicate-xyz
one_record "a usage error" 0 "nook ls: .*bogus.*\nTry 'nook ls --help'\.\n" ls --bogus
# The control byte is escaped inside the same write.
one_record "a failure quoting a control byte" 0 "nook: .*no\\\\x01such.*\n" inspect "no$(printf '\001')such"
one_record "a JSON error" 0 '\{"error":\{.*\}\}\n' --json inspect no-such-sandbox-xyz
one_record "a bad top-level option (the help follows)" 1 "nook: .*bogus-top-level[^\n]*\n" --bogus-top-level
