#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 17, exec: the spare helper answers the client itself.  The supervisor passes the client's
# connection to the spare with the request; the helper sends "started"/"exited" there first, then
# its record to the supervisor, which only answers what it words itself (docs/design/runtime.md,
# Exec).  A raw client (python3, SOCK_SEQPACKET + SCM_RIGHTS) drives the protocol: the replies
# with and without "reportStarted", hostile values of it, a client that vanishes right after its
# request, one that hangs up right after "exited" while the command's background child runs
# (it must survive), and a reason that a truncation would have cut inside a UTF-8 character (the
# client hung for ever before).  No timing assertions: generous waits.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v python3 >/dev/null || plan skip_all "python3 is needed for the raw protocol client"
plan 17

run_nook create cd
is "$status" 0 "create cd"
S=$(sock_of cd)
check "its control socket is found" test -S "$S"

exec_protocol_checks "$S" cd

run_nook exec cd -- echo still-fine
is "$status/$out" "0/still-fine" "the sandbox serves the next exec"
run_nook rm -f cd
is "$status" 0 "rm -f cd (the background children go with it)"
