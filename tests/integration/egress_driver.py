#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plays nook-supervisor's part of the nook-egress protocol for test_egress_gateway.sh and
bench/egress_bench.sh (docs/design/egress.md):

egress_driver.py GATEWAY GW_NETNS GUEST_NETNS CONFIG AUDIT STATE_DIR

Starts GATEWAY in GW_NETNS (`ip netns exec`, so /etc/netns/GW_NETNS/hosts is its /etc/hosts)
with fd 3 a SOCK_SEQPACKET socket; sends CONFIG (a JSON file) with AUDIT opened
O_WRONLY|O_APPEND; writes the CA it answers to STATE_DIR/ca.pem; makes the two listeners inside
GUEST_NETNS on 127.0.0.1 and writes their ports to STATE_DIR/ports ("P80 P443"), the gateway's
pid to STATE_DIR/pid; then waits for SIGTERM or the gateway's exit, and closes fd 3.
On a protocol error it writes STATE_DIR/error and exits 1.
"""
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys

gateway, gw_ns, guest_ns, config_path, audit_path, state = sys.argv[1:7]
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def setns(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def listeners_in(ns):
    """Two listening sockets made inside netns ns (setns on this thread, then back)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open("/run/netns/" + ns, os.O_RDONLY)
    try:
        setns(target)
        socks = []
        for _ in range(2):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            s.listen(128)
            socks.append(s)
    finally:
        setns(own)
        os.close(own)
        os.close(target)
    return socks


def fail(msg):
    with open(os.path.join(state, "error"), "w") as f:
        f.write(msg + "\n")
    sys.exit(1)


def main():
    sup, gw = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # preexec_fn runs before close_fds: fd 3 must be on the keep list too
    stderr = open(os.path.join(state, "gateway.stderr"), "ab")
    proc = subprocess.Popen(["ip", "netns", "exec", gw_ns, gateway], pass_fds=(gw.fileno(), 3),
                            preexec_fn=lambda: os.dup2(gw.fileno(), 3), stdin=subprocess.DEVNULL,
                            stdout=stderr, stderr=stderr, close_fds=True, env={"PATH": os.environ["PATH"]})
    gw.close()
    with open(os.path.join(state, "pid"), "w") as f:
        f.write("%d\n" % proc.pid)
    with open(config_path, "rb") as f:
        config = f.read()
    audit = os.open(audit_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    socket.send_fds(sup, [config], [audit])
    os.close(audit)
    msg = json.loads(sup.recv(1 << 20) or b"{}")
    if "caCertPem" not in msg:
        fail("gateway answered %r" % msg)
    with open(os.path.join(state, "ca.pem"), "w") as f:
        f.write(msg["caCertPem"])
    socks = listeners_in(guest_ns)
    socket.send_fds(sup, [b'{"listen":[80,443]}'], [s.fileno() for s in socks])
    with open(os.path.join(state, "ports"), "w") as f:
        f.write("%d %d\n" % (socks[0].getsockname()[1], socks[1].getsockname()[1]))
    for s in socks:
        s.close()
    msg = json.loads(sup.recv(4096) or b"{}")
    if msg != {"ready": True}:
        fail("gateway answered %r instead of ready" % msg)
    open(os.path.join(state, "ready"), "w").close()
    # SIGTERM: close fd 3 (the gateway sees EOF and exits), then the wait below returns
    signal.signal(signal.SIGTERM, lambda *a: sup.close())
    proc.wait()


if __name__ == "__main__":
    main()
