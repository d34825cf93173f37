#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The "public" HTTP(S) server of test_egress_gateway.sh: records every request it receives
(request line, headers, body) as one JSON line in LOG, answers 200 with a small body.

egress_upstream.py LOG ADDR PORT [CERT KEY]   (with CERT/KEY: HTTPS)
egress_upstream.py --pattern-sha256 N [TOKEN]  the sha256 of /pattern/N (/patternecho/N: TOKEN masked)
"""
import base64
import hashlib
import http.server
import json
import ssl
import sys
import threading


def pattern_body(n, token=b""):
    """n bytes that never repeat (sha256 of a counter), token written over every 64 KiB boundary."""
    body = bytearray(b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(n // 32 + 1))[:n])
    for at in range(65536 - len(token) // 2, n - len(token), 65536) if token else ():
        body[at:at + len(token)] = token
    return bytes(body)


if sys.argv[1] == "--pattern-sha256":  # N [TOKEN]: what a test expects, TOKEN masked as '*'
    tok = sys.argv[3].encode() if len(sys.argv) > 3 else b""
    print(hashlib.sha256(pattern_body(int(sys.argv[2]), b"*" * len(tok))).hexdigest())
    sys.exit(0)
log_path, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
lock = threading.Lock()
released = threading.Event()  # /headfirst's body waits for a request to /release (15 s at most)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(n) if n else b""

    def _websocket(self):
        """The handshake, then a raw echo of whatever arrives (enough to see bytes pass both ways)."""
        key = self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", base64.b64encode(hashlib.sha1(key.encode()).digest()).decode())
        self.end_headers()
        self.wfile.flush()
        if "wsecho" in self.path:  # after the 101, the Authorization it got, into the stream
            self.connection.sendall(("auth:%s;" % self.headers.get("Authorization", "")).encode())
        while True:
            data = self.connection.recv(4096)
            if not data:
                break
            self.connection.sendall(data)
        self.close_connection = True

    def _serve(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            rec = {"line": self.requestline, "headers": [[k, v] for k, v in self.headers.items()], "body": ""}
            with lock, open(log_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
            return self._websocket()
        body = self._body()
        rec = {"line": self.requestline, "headers": [[k, v] for k, v in self.headers.items()],
               "body": body.decode("latin-1"), "peer": self.client_address[1]}
        with lock, open(log_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        if "/big/" in self.path:
            n = int(self.path.rsplit("/", 1)[1])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                self.wfile.write(chunk[: min(n, len(chunk))])
                n -= min(n, len(chunk))
            return
        if "/badchunked" in self.path or "/truncated/" in self.path:
            return self._broken()
        if "/pattern" in self.path or "/empty" in self.path:
            return self._pattern()
        if "/release" in self.path or "/headfirst" in self.path:
            return self._headfirst()
        if "trailerecho" in self.path:  # the Authorization it got in a chunk extension and a trailer
            auth = self.headers.get("Authorization", "").encode()
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Trailer", "X-Echo")
            self.end_headers()
            self.wfile.write(b"3;ext=%s\r\nhi\n\r\n0\r\nX-Echo: %s\r\n\r\n" % (auth.replace(b" ", b"_"), auth))
            return
        if "chunked" in self.path:
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"hello ", b"chunked ", b"world\n"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        out = ("upstream saw %s %s\n" % (self.command, self.path)).encode()
        if "echo" in self.path:  # an upstream that reflects what it got (headers in a header and the body)
            out += str(self.headers).encode()
            self.send_response(200)
            self.send_header("X-Echo-Authorization", self.headers.get("Authorization", ""))
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    def _broken(self):
        """/badchunked: a chunked answer whose second size line is not hex; /truncated/N: Content-Length N,
        N/2 bytes, then the connection closes."""
        self.send_response(200)
        self.close_connection = True
        if "/badchunked" in self.path:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"6\r\nhello \r\nzz\r\nbroken\r\n0\r\n\r\n")
            return
        n = int(self.path.rsplit("/", 1)[1])
        self.send_header("Content-Length", str(n))
        self.end_headers()
        self.wfile.write(b"t" * (n // 2))

    def _headfirst(self):
        """/headfirst: the head now, the body once /release was asked for; /release: 200."""
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.flush()
        if "/release" in self.path:
            released.set()
        else:
            released.wait(15)
            released.clear()
        self.wfile.write(b"body\n")

    def _pattern(self):
        """Bulk bodies of the gateway's relay (egressperf): /pattern/N (Content-Length), /patternchunked/N
        (70000-byte chunks), /patternecho/N (the Authorization token written across every 64 KiB
        boundary, for the masking), /empty (Content-Length: 0).  The bytes are pattern_body's."""
        n = int(self.path.rsplit("/", 1)[1]) if "/empty" not in self.path else 0
        token = self.headers.get("Authorization", "").split(" ")[-1].encode() if "echo" in self.path else b""
        body = pattern_body(n, token)
        self.send_response(200)
        if "chunked" in self.path:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, n, 70000):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(body[i:i + 70000]), body[i:i + 70000]))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(n))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


srv = Server((addr, port), Handler)
if len(sys.argv) > 5:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[4], sys.argv[5])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
