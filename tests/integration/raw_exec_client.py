#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A raw client of a sandbox's control socket, for the exec protocol's tests (lib.sh, raw_exec).

    raw_exec_client.py SOCK MODE REQUEST-JSON

Sends the request with /dev/null as stdin, stdout and stderr (none with "tty") and prints the
replies' ops ("started", "started+fd" when an fd came with it, "exited:STATUS", "error:CODE",
"stopped", "EOF") up to "exited" (MODE wait) or up to "stopped" (MODE stopped; MODE remove: asks
for the removal's stop after "exited", as nook_sandbox_remove does on such a connection); MODE
close: hangs up right after the request and prints nothing."""
import json, os, socket, sys
path, mode, req = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
nul = os.open("/dev/null", os.O_RDWR)
socket.send_fds(s, [req.encode()], [] if json.loads(req).get("tty") else [nul, nul, nul])
if mode == "close":
    sys.exit(0)
s.settimeout(120)
ops, kept = [], []
while True:
    m, fds, _, _ = socket.recv_fds(s, 262144, 4)
    if not m:
        ops.append("EOF")
        break
    j = json.loads(m)
    op = j.get("op")
    if op == "exited":
        op += ":%d" % j.get("status", -1)
    elif op == "error":
        op += ":%s" % j.get("code")
    elif op == "started" and fds:
        op += "+fd"
    kept += fds  # a pty master closed early would hang up the command (SIGHUP)
    ops.append(op)
    if op.startswith("exited") and mode == "remove":
        s.send(b'{"op":"stop","timeoutMs":0,"remove":true}')
    if op.startswith("error") or (op.startswith("exited") and mode == "wait") or op == "stopped":
        break
print(" ".join(ops))
