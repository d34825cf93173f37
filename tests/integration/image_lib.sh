# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Helpers for the image tests (source after lib.sh): a real Debian docker-registry on loopback,
# OCI images built here from busybox-static by a small Python writer and pushed with skopeo,
# and a fault-injecting stub server for the cases a real registry cannot produce.
# Everything started is stopped on exit, before lib.sh's leak check.

IMG_WORK=$(mktemp -d /var/tmp/nook-imgtest.XXXXXXXX) || bail_out "mktemp failed"
chmod 0755 "$IMG_WORK"
_img_pids=()

_img_stop_all() {
        local p
        for p in "${_img_pids[@]}"; do
                kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
        done
        _img_pids=()
        rm -rf "$IMG_WORK"
}
trap 'rc=$?; _img_stop_all; (exit $rc); _tap_finish' EXIT

img_require() {
        local b
        for b in docker-registry skopeo python3 busybox; do
                command -v "$b" >/dev/null || bail_out "missing $b (scripts/deps.sh installs it)"
        done
}

img_free_port() {
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

_img_wait_port() {
        local port=$1 i
        for i in $(seq 1 100); do
                (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && return 0
                sleep 0.1
        done
        return 1
}

# img_start_registry NAME [htpasswd|tls]: starts docker-registry; sets REG_<NAME>=127.0.0.1:PORT
img_start_registry() {
        local name=$1 mode=${2:-plain} port dir
        port=$(img_free_port)
        dir="$IMG_WORK/reg-$name"
        mkdir -p "$dir/data"
        {
                echo "version: 0.1"
                echo "log: {level: error}"
                echo "storage: {filesystem: {rootdirectory: $dir/data}, delete: {enabled: true}}"
                echo "http:"
                echo "  addr: 127.0.0.1:$port"
                if [[ $mode == tls ]]; then
                        img_make_ca
                        echo "  tls: {certificate: $IMG_WORK/ca/server.crt, key: $IMG_WORK/ca/server.key}"
                fi
                if [[ $mode == htpasswd ]]; then
                        htpasswd -Bbc "$dir/htpasswd" nookuser 'n0ok-secret' >/dev/null 2>&1 ||
                                bail_out "htpasswd (apache2-utils) is needed"
                        echo "auth: {htpasswd: {realm: nook-test, path: $dir/htpasswd}}"
                fi
        } >"$dir/config.yml"
        docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 &
        _img_pids+=($!)
        _img_wait_port "$port" || bail_out "docker-registry did not start: $(tail -5 "$dir/log")"
        printf -v "REG_$name" '127.0.0.1:%s' "$port"
}

img_make_ca() {
        [[ -f "$IMG_WORK/ca/server.crt" ]] && return 0
        mkdir -p "$IMG_WORK/ca"
        (
                cd "$IMG_WORK/ca" || exit 1
                openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=nook test CA" \
                        -keyout ca.key -out ca.crt 2>/dev/null &&
                        openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key \
                                -out server.csr 2>/dev/null &&
                        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >ext.cnf &&
                        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
                                -extfile ext.cnf -out server.crt 2>/dev/null
        ) || bail_out "openssl could not make the test CA"
        chmod 0644 "$IMG_WORK/ca/"*
}

# img_build OUT_LAYOUT TAG < spec.json: writes an OCI image layout (see the Python below).
img_build() {
        local spec="$IMG_WORK/spec.$$.json"
        cat >"$spec"
        python3 - "$1" "$2" "$spec" <<'PY'
import gzip, hashlib, io, json, os, sys, tarfile, time
out, tag = sys.argv[1], sys.argv[2]
spec = json.load(open(sys.argv[3]))
os.makedirs(out + "/blobs/sha256", exist_ok=True)
def blob(data, mt):
    d = hashlib.sha256(data).hexdigest()
    with open(f"{out}/blobs/sha256/{d}", "wb") as f:
        f.write(data)
    return {"mediaType": mt, "digest": "sha256:" + d, "size": len(data)}
def layer(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            ti = tarfile.TarInfo(e["name"])
            ti.mtime = 1700000000
            ti.uid = e.get("uid", 0); ti.gid = e.get("gid", 0)
            ty = e.get("type", "file")
            data = None
            if ty == "dir":
                ti.type = tarfile.DIRTYPE; ti.mode = e.get("mode", 0o755)
            elif ty == "symlink":
                ti.type = tarfile.SYMTYPE; ti.linkname = e["target"]; ti.mode = 0o777
            elif ty == "hardlink":
                ti.type = tarfile.LNKTYPE; ti.linkname = e["target"]; ti.mode = 0o644
            elif ty == "chardev":
                ti.type = tarfile.CHRTYPE; ti.devmajor = e.get("major", 1); ti.devminor = e.get("minor", 3); ti.mode = 0o666
            else:
                if "src" in e:
                    data = open(e["src"], "rb").read()
                else:
                    data = e.get("data", "").encode()
                ti.size = len(data); ti.mode = e.get("mode", 0o644)
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    diff = "sha256:" + hashlib.sha256(raw).hexdigest()
    if spec.get("compression", "gzip") == "gzip":
        return blob(gzip.compress(raw, mtime=0), "application/vnd.oci.image.layer.v1.tar+gzip"), diff
    return blob(raw, "application/vnd.oci.image.layer.v1.tar"), diff
layers = [layer(l) for l in spec["layers"]]
def manifest(arch):
    cfg = {"architecture": arch, "os": "linux", "config": spec.get("config", {}),
           "rootfs": {"type": "layers", "diff_ids": [d for _, d in layers]}}
    c = blob(json.dumps(cfg).encode(), "application/vnd.oci.image.config.v1+json")
    m = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
         "config": c, "layers": [l for l, _ in layers]}
    d = blob(json.dumps(m).encode(), "application/vnd.oci.image.manifest.v1+json")
    d["platform"] = {"architecture": arch, "os": "linux"}
    return d
archs = spec.get("platforms")
if archs:
    idx = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
           "manifests": [manifest(a) for a in archs]}
    top = blob(json.dumps(idx).encode(), "application/vnd.oci.image.index.v1+json")
else:
    top = manifest(spec.get("arch", "amd64"))
    top.pop("platform")
top["annotations"] = {"org.opencontainers.image.ref.name": tag}
index = {"schemaVersion": 2, "manifests": [top]}
json.dump(index, open(out + "/index.json", "w"))
json.dump({"imageLayoutVersion": "1.0.0"}, open(out + "/oci-layout", "w"))
PY
}

# img_push LAYOUT TAG DEST (host:port/repo:tag) [skopeo args...]
img_push() {
        local layout=$1 tag=$2 dest=$3
        shift 3
        skopeo copy --quiet --all --dest-tls-verify=false "$@" "oci:$layout:$tag" "docker://$dest" \
                >"$IMG_WORK/push.log" 2>&1 || {
                diag "skopeo copy failed: $(cat "$IMG_WORK/push.log")"
                return 1
        }
}

# The busybox root filesystem as layer entries (JSON array on stdout).
img_busybox_entries() {
        python3 - <<'PY'
import json, subprocess
applets = subprocess.run(["busybox", "--list"], capture_output=True, text=True).stdout.split()
e = [{"name": d, "type": "dir"} for d in ["bin", "etc", "tmp", "root", "proc", "sys", "dev", "workspace", "usr", "usr/bin"]]
e.append({"name": "bin/busybox", "src": "/bin/busybox", "mode": 0o755})
e += [{"name": "bin/" + a, "type": "symlink", "target": "busybox"} for a in applets if a != "busybox"]
e.append({"name": "etc/passwd", "data": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n"})
e.append({"name": "etc/group", "data": "root:x:0:\n"})
print(json.dumps(e))
PY
}

# img_stub MODE: a fault-injecting registry on loopback serving one image at /v2/stub/img
# (modes: flaky500, stall, badblob, truncated, unknowntype, noplatform, auth401); sets STUB_ADDR.
img_stub() {
        local mode=$1 port
        port=$(img_free_port)
        python3 - "$port" "$mode" "$IMG_WORK/stub-$mode.log" <<'PY' &
import gzip, hashlib, http.server, io, json, sys, tarfile, time
port, mode, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    ti = tarfile.TarInfo("hello"); data = b"hi\n"; ti.size = len(data); t.addfile(ti, io.BytesIO(data))
raw = buf.getvalue(); layer = gzip.compress(raw, mtime=0)
def dg(b): return "sha256:" + hashlib.sha256(b).hexdigest()
cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": [dg(raw)]}}).encode()
lmt = "application/x-nook-unknown" if mode == "unknowntype" else "application/vnd.oci.image.layer.v1.tar+gzip"
man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": dg(cfg), "size": len(cfg)},
    "layers": [{"mediaType": lmt, "digest": dg(layer), "size": len(layer)}]}).encode()
idx = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": dg(man), "size": len(man),
                   "platform": {"os": "linux", "architecture": "s390x"}}]}).encode()
blobs = {dg(cfg): cfg, dg(layer): layer}
hits = {}
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        open(log, "a").write(self.path + "\n")
    def send(self, code, body=b"", ct="application/json", extra=None):
        self.send_response(code)
        self.send_header("Content-Type", ct)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items(): self.send_header(k, v)
        self.end_headers(); self.wfile.write(body)
    def do_GET(self):
        self.log_message()
        hits[self.path] = hits.get(self.path, 0) + 1
        if mode == "auth401":
            return self.send(401, b'{"errors":[]}', extra={"WWW-Authenticate": 'Basic realm="stub"'})
        if mode == "flaky500" and hits[self.path] == 1:
            return self.send(500, b"try again")
        if self.path == "/v2/":
            return self.send(200, b"{}")
        if self.path.startswith("/v2/stub/img/manifests/"):
            if mode == "stall":
                time.sleep(30); return
            if mode == "noplatform" and self.path.endswith("/latest"):
                return self.send(200, idx, "application/vnd.oci.image.index.v1+json")
            return self.send(200, man, "application/vnd.oci.image.manifest.v1+json")
        if self.path.startswith("/v2/stub/img/blobs/"):
            d = self.path.rsplit("/", 1)[1]
            b = blobs.get(d)
            if b is None: return self.send(404)
            if d == dg(layer) and mode == "badblob":
                b = gzip.compress(raw.replace(b"hi\n", b"HI\n"), mtime=0)
                b = b[:len(layer)].ljust(len(layer), b"\0")
            if d == dg(layer) and mode == "truncated":
                self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers()
                self.wfile.write(b[: len(b) // 2]); self.wfile.flush(); self.connection.close(); return
            return self.send(200, b, "application/octet-stream")
        self.send(404)
http.server.ThreadingHTTPServer.daemon_threads = True
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
        _img_pids+=($!)
        _img_wait_port "$port" || bail_out "stub server did not start"
        STUB_ADDR="127.0.0.1:$port"
}
