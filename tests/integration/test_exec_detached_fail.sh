#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A detached command that cannot start fails as a foreground one does: the same status (127 for
# a missing binary, 126 for a bad directory or user) and the same "nook: ..." line on stderr,
# because init reports "started" only once the command runs (supervisor/init_exec.c, helper_rec).
# `run -d` and `exec -t` take the same path.  A command that starts is still detached at once.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 26

run_nook create d1
is "$status" 0 "create d1"

# same_failure DESC WANT-STATUS WANT-MSG EXEC-ARGS...: foreground and detached agree.  3 tests.
same_failure() {
        local desc=$1 want_status=$2 want_msg=$3 fg_err
        shift 3
        run_nook exec "$@"
        fg_err=$err
        is "$status" "$want_status" "$desc: foreground exit status $want_status"
        run_nook exec -d "$@"
        is "$status/$err" "$want_status/$fg_err" "$desc: detached, the same status and message"
        like "$err" "$want_msg" "$desc: the message names the cause"
}

same_failure "a missing binary" 127 "^nook: cannot run '/no/such-binary': No such file or directory$" \
        d1 -- /no/such-binary
same_failure "a missing directory" 126 "^nook: cannot change to directory '/no/such-dir'" \
        -w /no/such-dir d1 -- true
same_failure "an unknown user" 126 "^nook: no user 'nosuchuser' in this sandbox's /etc/passwd$" \
        -u nosuchuser d1 -- true

# A command that starts is detached at once, prints nothing, and runs on.
run_nook exec -d d1 -- sh -c 'sleep 0.3; echo done >/workspace/detached'
is "$status/$out$err" "0/" "a detached command that starts: status 0, nothing printed"
wsdir=$("$NOOK" ws path d1)
check "it ran in the background" wait_for 10 test -s "$wsdir/detached"

run_nook exec d1 -- true
is "$status" 0 "the sandbox still answers exec after the failures"

run_nook logs d1
like "$out$err" "nook: cannot run '/no/such-binary'" "the detached failure is in the sandbox's log too"

# run -d: the same as run in the foreground (127, the sandbox removed).
run_nook run -d --image host -- /no/such-binary
is "$status" 127 "run -d of a missing binary exits 127"
like "$err" "cannot run '/no/such-binary'" "run -d says why"

# With a terminal the reason reaches the pty, which never comes back: nook says it instead.
if command -v script >/dev/null; then
        tty_err=$(timeout -s KILL 20 script -qec "$NOOK exec -t d1 -- /no/such-binary" /dev/null </dev/null 2>&1)
        tty_status=$?
        is "$tty_status" 127 "exec -t of a missing binary exits 127"
        like "$tty_err" "nook: cannot run '/no/such-binary'" "exec -t says why"
else
        skip "script(1) is not installed: no terminal to test exec -t with"
        skip "script(1) is not installed"
fi

# The guest owns /etc/passwd: a FIFO there neither hangs an exec nor its "started".
run_nook exec d1 -- sh -c 'rm -f /etc/passwd && mkfifo /etc/passwd'
is "$status" 0 "the guest replaces /etc/passwd with a FIFO"
NOOK_TEST_TIMEOUT=15 run_nook exec -d d1 -- true
is "$status" 0 "exec -d still starts (the FIFO is not read)"
NOOK_TEST_TIMEOUT=15 run_nook exec -u nosuchuser d1 -- true
like "$status|$err" "^126\|nook: no user 'nosuchuser'" "a user lookup is refused, not hung"

# An entry whose id is not a number (read as 0 before) or is -1 ("unchanged" to setresuid) is
# invalid and skipped, as glibc skips it: the user is refused, never run as the sandbox's root.
run_nook exec d1 -- sh -c 'rm -f /etc/passwd && printf "%s\n" "root:x:0:0::/root:/bin/sh" \
        "neg:x:4294967295:1000::/:/bin/sh" "word:x:abc:1000::/:/bin/sh" \
        "badgid:x:1000:4294967295::/:/bin/sh" "ok:x:0:0::/:/bin/sh" >/etc/passwd'
is "$status" 0 "the guest writes a /etc/passwd with bad ids"
for u in neg word badgid; do
        run_nook exec -u "$u" d1 -- id -u
        is "$status|$out|$err" "126||nook: no user '$u' in this sandbox's /etc/passwd" \
                "user '$u' (a bad id) is refused, not run as root"
done
run_nook exec -u ok d1 -- id -u
is "$status|$out" "0|0" "a valid entry in the same file still resolves"

run_nook rm d1
