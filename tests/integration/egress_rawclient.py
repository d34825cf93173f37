#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sends raw bytes (argv[4], with \\r and \\n escapes) over TLS to ADDR:443 as HOST, trusting CA,
and prints the first line of the answer (or 'closed').  egress_rawclient.py CA ADDR HOST BYTES"""
import socket
import ssl
import sys

ca, addr, host, raw = sys.argv[1:5]
data = raw.encode().decode("unicode_escape").encode("latin-1")
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection((addr, 443), timeout=10), server_hostname=host)
s.sendall(data)
got = b""
try:
    while b"\r\n" not in got:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
except (ConnectionError, ssl.SSLError):
    pass
print(got.split(b"\r\n")[0].decode("latin-1") if got else "closed")
