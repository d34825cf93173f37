#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The test world's HTTPS upstream for test_egress.sh: serves every path on 0.0.0.0:443 (and
HTTP on :8080 for nothing but health), appends each request (method, host, path, headers, body)
to LOG as one JSON line, and answers "upstream <METHOD> <path> auth=<real|placeholder|none|other>"
where "real" means the Authorization header is "Bearer " + the sentinel.  It never echoes a header
value: the guest must not learn the secret from it.

    egress_e2e_upstream.py CERT KEY LOG SENTINEL_FILE

The sentinel comes from a file: in an argv it would show in every process listing the test
sweeps for it.
"""
import http.server
import json
import ssl
import sys
import threading

cert, key, log, sentinel_file = sys.argv[1:5]
with open(sentinel_file) as f:
    sentinel = f.read().strip()
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _serve(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        auth = self.headers.get("Authorization") or ""
        kind = ("none" if not auth else "real" if auth == "Bearer " + sentinel
                else "placeholder" if "nook-ph-" in auth else "other")
        with lock, open(log, "a") as f:
            f.write(json.dumps({"method": self.command, "host": self.headers.get("Host"),
                                "path": self.path, "headers": dict(self.headers),
                                "body": body.decode("utf-8", "replace")}) + "\n")
        out = f"upstream {self.command} {self.path} auth={kind}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, *args):
        pass


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["http/1.1"])
srv = http.server.ThreadingHTTPServer(("0.0.0.0", 443), Handler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
