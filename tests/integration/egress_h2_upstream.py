#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An HTTPS upstream that speaks only HTTP/2 (ALPN h2, python3-h2), for test_egress_h2up.sh.
Records every request as one JSON line in LOG (proto, connection number, method, path, headers,
body length, sha256 and the body when short), and answers by path:

  /big/N      N bytes with content-length        /nolen/N  N bytes without content-length
  /upload     {"len":…, "sha256":…} of the body  /echo     x-echo-authorization: the header
  /rst        RST_STREAM (INTERNAL_ERROR) before any answer
  /goaway     GOAWAY (ENHANCE_YOUR_CALM, last stream below this one), then the socket closes
  /rstmid     headers and 1000 bytes, then RST_STREAM
  /rstbody    RST_STREAM (REFUSED_STREAM) as soon as the request head arrives
  /early      413 as soon as the request head arrives, then RST_STREAM (NO_ERROR): the body is not read
  else        200 "h2 upstream saw METHOD PATH"

egress_h2_upstream.py LOG ADDR PORT CERT KEY
"""
import hashlib
import json
import socket
import ssl
import sys
import threading

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

log_path, addr, port, cert, key = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
lock = threading.Lock()
conn_numbers = iter(range(1, 1 << 30))


class Conn:
    def __init__(self, sock, number):
        self.sock, self.number = sock, number
        self.h2 = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
        self.streams = {}  # id -> {"headers": [...], "body": bytearray}
        self.pending = []

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def read_events(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        return self.h2.receive_data(data)

    def send_body(self, sid, data, end=True):
        """Within the flow-control windows: waits for WINDOW_UPDATE frames as needed."""
        data = memoryview(data)  # slices without copies
        while data:
            n = min(self.h2.local_flow_control_window(sid), self.h2.max_outbound_frame_size, len(data))
            if n == 0:
                self.flush()
                self.pending += self.read_events()
                continue
            self.h2.send_data(sid, data[:n].tobytes())
            data = data[n:]
            self.flush()
        if end:
            self.h2.end_stream(sid)
            self.flush()

    def respond(self, sid, st):
        hdr = dict(st["headers"])
        method, path = hdr.get(":method", ""), hdr.get(":path", "")
        body = bytes(st["body"])
        rec = {"proto": "h2", "conn": self.number, "method": method, "path": path,
               "authority": hdr.get(":authority", ""), "headers": st["headers"], "bodyLen": len(body),
               "sha256": hashlib.sha256(body).hexdigest(), "body": body.decode("latin-1") if len(body) < 4096 else ""}
        with lock, open(log_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        if path == "/rst":
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
            self.flush()
            return
        if path == "/goaway":
            self.h2.close_connection(h2.errors.ErrorCodes.ENHANCE_YOUR_CALM, last_stream_id=sid - 2 if sid > 2 else 0)
            self.flush()
            # the peer closes first: closing with its frames unread would reset the connection
            # and could drop the GOAWAY before it is read
            self.sock.settimeout(5)
            while self.sock.recv(65536):
                pass
            raise ConnectionError("goaway")
        if path == "/rstmid":
            self.h2.send_headers(sid, [(":status", "200"), ("content-length", "100000")])
            self.send_body(sid, b"m" * 1000, end=False)
            self.h2.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
            self.flush()
            return
        headers = [(":status", "200")]
        if path.startswith("/big/") or path.startswith("/nolen/"):
            out = b"x" * int(path.rsplit("/", 1)[1])
        elif path == "/upload":
            out = json.dumps({"len": len(body), "sha256": rec["sha256"]}).encode()
        else:
            out = ("h2 upstream saw %s %s\n" % (method, path)).encode()
            if path.startswith("/echo"):
                headers.append(("x-echo-authorization", hdr.get("authorization", "")))
        if not path.startswith("/nolen/"):
            headers.append(("content-length", str(len(out))))
        if method == "HEAD":
            self.h2.send_headers(sid, headers, end_stream=True)
            self.flush()
            return
        self.h2.send_headers(sid, headers)
        self.send_body(sid, out)

    def early(self, sid, st):
        with lock, open(log_path, "a") as f:
            f.write(json.dumps({"proto": "h2", "conn": self.number, "path": "/early", "early": True}) + "\n")
        self.h2.send_headers(sid, [(":status", "413"), ("content-length", "13")])
        self.h2.send_data(sid, b"too large ...", end_stream=True)
        self.h2.reset_stream(sid, h2.errors.ErrorCodes.NO_ERROR)
        self.flush()

    def handle(self, ev):
        if isinstance(ev, h2.events.RequestReceived):
            self.streams[ev.stream_id] = {"headers": [[k.decode(), v.decode()] for k, v in ev.headers],
                                          "body": bytearray()}
            if ev.stream_ended:
                self.respond(ev.stream_id, self.streams.pop(ev.stream_id))
            elif dict(self.streams[ev.stream_id]["headers"]).get(":path") == "/early":
                self.early(ev.stream_id, self.streams.pop(ev.stream_id))
            elif dict(self.streams[ev.stream_id]["headers"]).get(":path") == "/rstbody":
                del self.streams[ev.stream_id]
                self.h2.reset_stream(ev.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                self.flush()
        elif isinstance(ev, h2.events.DataReceived):
            if ev.stream_id in self.streams:
                self.streams[ev.stream_id]["body"] += ev.data
            try:
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            except h2.exceptions.StreamClosedError:
                pass
        elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id in self.streams:
            self.respond(ev.stream_id, self.streams.pop(ev.stream_id))
        elif isinstance(ev, h2.events.ConnectionTerminated):
            raise ConnectionError("terminated")

    def run(self):
        self.h2.initiate_connection()
        self.flush()
        while True:
            for ev in self.read_events():
                self.pending.append(ev)
            while self.pending:
                self.handle(self.pending.pop(0))
            self.flush()


def serve(raw):
    try:
        sock = ctx.wrap_socket(raw, server_side=True)
        if sock.selected_alpn_protocol() != "h2":
            sock.close()
            return
        Conn(sock, next(conn_numbers)).run()
    except (ConnectionError, OSError, ssl.SSLError, h2.exceptions.ProtocolError):
        pass
    finally:
        raw.close()


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["h2"])
srv = socket.create_server((addr, port))
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
