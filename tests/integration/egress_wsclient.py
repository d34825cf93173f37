#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A WebSocket upgrade from the guest of test_egress_gateway.sh: egress_wsclient.py CA ADDR HOST PATH
prints the status line, then what comes back after sending 'hello-ws' (the test upstream echoes)."""
import socket
import ssl
import sys

ca, addr, host, path = sys.argv[1:5]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection((addr, 443), timeout=10), server_hostname=host)
s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, host)).encode())
head = b""
while b"\r\n\r\n" not in head:
    chunk = s.recv(4096)
    if not chunk:
        break
    head += chunk
print(head.split(b"\r\n")[0].decode())
if b" 101 " in head.split(b"\r\n")[0]:
    s.sendall(b"hello-ws")
    print(s.recv(4096).decode())
