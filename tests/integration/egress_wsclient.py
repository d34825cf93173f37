#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A WebSocket upgrade from the guest of test_egress_gateway.sh: egress_wsclient.py CA ADDR HOST PATH
[HEADER] prints the status line, then what comes back after sending 'hello-ws' (the test upstream
echoes; on a /wsecho path it first sends the Authorization it got)."""
import socket
import ssl
import sys

ca, addr, host, path = sys.argv[1:5]
extra = sys.argv[5] + "\r\n" if len(sys.argv) > 5 else ""
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection((addr, 443), timeout=10), server_hostname=host)
s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s\r\n" % (path, host, extra)).encode())
def recv_until(sock, buf, marker):
    """Reads until marker is in buf (or the peer closes); returns all that came."""
    while marker not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


got = recv_until(s, b"", b"\r\n\r\n")
head, _, rest = got.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode())
if b" 101 " in head.split(b"\r\n")[0]:
    s.sendall(b"hello-ws")
    # what came with the head (a /wsecho upstream writes right after its 101) is the stream's
    print(recv_until(s, rest, b"hello-ws").decode())
