#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Layer compression (issue #4): images whose layers are zstd-compressed, uncompressed, or a mix
# of gzip, zstd and none are pulled from a real docker-registry on loopback and run, and their
# file tree is compared with the same image in gzip.  A layer whose bytes are not what its
# media type says (zstd labelled gzip, gzip labelled zstd, gzip labelled plain tar) fails the
# pull naming the layer and both compressions.  The layouts are written here (tar + the zstd
# command) and pushed with `skopeo copy --preserve-digests`, so skopeo changes no blob; one
# image is also recompressed to zstd by skopeo itself.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
img_require
command -v zstd >/dev/null || bail_out "missing zstd (scripts/deps.sh installs it)"
plan 18

img_start_registry plain
export NOOK_INSECURE_REGISTRIES="$REG_plain"

# build_layout OUT TAG < spec: {"layers": [{"compression": C, "entries": [...]}, ...]} where C is
# gzip, zstd, none, or BYTES-as-LABEL (zstd-as-gzip: zstd bytes under the gzip media type).
build_layout() {
        local spec="$IMG_WORK/cspec.$$.json"
        cat >"$spec"
        python3 - "$1" "$2" "$spec" <<'PY'
import gzip, hashlib, io, json, os, subprocess, sys, tarfile
out, tag, spec = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
os.makedirs(out + "/blobs/sha256", exist_ok=True)
MT = {"gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
      "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
      "none": "application/vnd.oci.image.layer.v1.tar"}
def blob(data, mt):
    d = hashlib.sha256(data).hexdigest()
    open(f"{out}/blobs/sha256/{d}", "wb").write(data)
    return {"mediaType": mt, "digest": "sha256:" + d, "size": len(data)}
def tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            ti = tarfile.TarInfo(e["name"]); ti.mtime = 1700000000
            ty, data = e.get("type", "file"), None
            if ty == "dir":
                ti.type = tarfile.DIRTYPE; ti.mode = 0o755
            elif ty == "symlink":
                ti.type = tarfile.SYMTYPE; ti.linkname = e["target"]; ti.mode = 0o777
            else:
                data = open(e["src"], "rb").read() if "src" in e else e.get("data", "").encode()
                ti.size = len(data); ti.mode = e.get("mode", 0o644)
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()
def compress(raw, how):
    if how == "gzip":
        return gzip.compress(raw, mtime=0)
    if how == "zstd":
        return subprocess.run(["zstd", "-q", "-c", "-3"], input=raw, capture_output=True, check=True).stdout
    return raw
layers, diffs = [], []
for l in spec["layers"]:
    raw = tar(l["entries"])
    how, _, label = l["compression"].partition("-as-")
    layers.append(blob(compress(raw, how), MT[label or how]))
    diffs.append("sha256:" + hashlib.sha256(raw).hexdigest())
cfg = blob(json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/bin"]},
                       "rootfs": {"type": "layers", "diff_ids": diffs}}).encode(),
           "application/vnd.oci.image.config.v1+json")
man = blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": cfg, "layers": layers}).encode(),
           "application/vnd.oci.image.manifest.v1+json")
man["annotations"] = {"org.opencontainers.image.ref.name": tag}
json.dump({"schemaVersion": 2, "manifests": [man]}, open(out + "/index.json", "w"))
json.dump({"imageLayoutVersion": "1.0.0"}, open(out + "/oci-layout", "w"))
PY
}

# make_image NAME C1 C2 C3: busybox, a data layer and a top layer with these compressions; every
# image gets the same three layer tars, so the trees must be the same whatever the compression
bb=$(img_busybox_entries)
payload=$(python3 -c 'import json; print(json.dumps([{"name":"opt","type":"dir"},{"name":"opt/data","data":"x"*300000},{"name":"opt/small","data":"small\n"}]))')
top='[{"name":"etc/motd","data":"top layer\n"},{"name":"opt/small","data":"replaced\n"}]'
make_image() {
        local name=$1
        build_layout "$IMG_WORK/c-$name" t <<JSON
{"layers": [{"compression": "$2", "entries": $bb}, {"compression": "$3", "entries": $payload},
            {"compression": "$4", "entries": $top}]}
JSON
        skopeo copy --quiet --preserve-digests --dest-tls-verify=false "oci:$IMG_WORK/c-$name:t" \
                "docker://$REG_plain/test/c-$name:t" >"$IMG_WORK/push-$name.log" 2>&1 ||
                bail_out "skopeo copy of $name failed: $(cat "$IMG_WORK/push-$name.log")"
}
layer_types() {
        skopeo inspect --raw --tls-verify=false "docker://$1" |
                python3 -c 'import json,sys; print(" ".join(l["mediaType"].rsplit(".", 1)[1] for l in json.load(sys.stdin)["layers"]))'
}
# the file tree as seen inside a sandbox: every path with type, size, mode, owner; data digests
tree_cmd='find /bin /etc /opt -xdev | sort | while read -r f; do stat -c "%n %F %s %a %u:%g" "$f"; done; md5sum /bin/busybox /opt/data /opt/small /etc/motd'
# tree_of NAME: runs tree_cmd in image NAME pulled into a NOOK_HOME of its own (layers are
# shared by diff_id, so one home would unpack each layer only once, from the first image)
tree_of() {
        local home="$NOOK_HOME/h-$1"
        mkdir -p -m 0700 "$home"
        NOOK_HOME=$home run_nook image pull --quiet "$REG_plain/test/c-$1:t"
        [[ $status == 0 ]] || {
                diag "pull of $1 failed: $err"
                return 1
        }
        NOOK_HOME=$home run_nook run --image "$REG_plain/test/c-$1:t" -- /bin/sh -c "$tree_cmd"
        [[ $status == 0 ]] || diag "run in $1 failed: $err"
}

make_image gzip gzip gzip gzip
make_image zstd zstd zstd zstd
make_image none none none none
make_image mixed zstd none gzip
is "$(layer_types "$REG_plain/test/c-zstd:t")" "tar+zstd tar+zstd tar+zstd" "the registry serves the zstd image's layers as tar+zstd"
is "$(layer_types "$REG_plain/test/c-none:t")" "tar tar tar" "the registry serves the uncompressed image's layers as tar"

tree_of gzip
is "$status" 0 "the gzip image runs"
ref_tree=$out
like "$ref_tree" "/opt/small regular file 9 644 0:0" "the reference tree has the top layer's file"
like "$ref_tree" "/bin/sh symbolic link" "the reference tree has busybox's applets"

for v in zstd none mixed; do
        tree_of $v
        is "$status" 0 "an image with $v layers pulls and runs"
        is "$out" "$ref_tree" "its file tree is the gzip image's, file for file"
done

# skopeo compressing the uncompressed image with zstd (1.9 does that only into an OCI layout:
# toward a registry it keeps layers as they are), then pushed unchanged
skopeo copy --quiet --dest-compress --dest-compress-format zstd "oci:$IMG_WORK/c-none:t" \
        "oci:$IMG_WORK/c-skopeo:t" >"$IMG_WORK/push-sk.log" 2>&1 &&
        skopeo copy --quiet --preserve-digests --dest-tls-verify=false "oci:$IMG_WORK/c-skopeo:t" \
                "docker://$REG_plain/test/c-skopeo:t" >>"$IMG_WORK/push-sk.log" 2>&1 ||
        bail_out "skopeo could not make or push a zstd image: $(cat "$IMG_WORK/push-sk.log")"
types=$(layer_types "$REG_plain/test/c-skopeo:t")
tree_of skopeo
is "$types:$out" "tar+zstd tar+zstd tar+zstd:$ref_tree" "an image skopeo compressed with zstd has the same tree"

# One home holding the same layers compressed two ways: the layer rows are shared by diff_id,
# yet each image keeps its own blobs through a prune (image_layers.blob), so both still export.
shared="$NOOK_HOME/h-shared"
mkdir -p -m 0700 "$shared"
for v in gzip zstd; do
        NOOK_HOME=$shared run_nook image pull --quiet "$REG_plain/test/c-$v:t"
done
NOOK_HOME=$shared run_nook image prune
is "$status" 0 "prune with two images sharing layers compressed two ways"
for v in gzip zstd; do
        NOOK_HOME=$shared run_nook image export "$REG_plain/test/c-$v:t" -o "$IMG_WORK/shared-$v.tar"
        is "$status:$err" "0:" "the $v image still exports after the prune (its own blobs were kept)"
done

# media type and bytes disagree: a clear failure naming the layer and both compressions
for liar in zstd-as-gzip gzip-as-zstd gzip-as-none; do
        make_image "$liar" gzip "$liar" gzip
        home="$NOOK_HOME/h-$liar"
        mkdir -p -m 0700 "$home"
        NOOK_HOME=$home run_nook image pull --quiet "$REG_plain/test/c-$liar:t"
        bytes=${liar%%-as-*} label=${liar##*-as-}
        [[ $label == none ]] && label=tar
        like "$status:$err" "^1:.*[Ll]ayer sha256:[0-9a-f]{64}.*$label.*$bytes" \
                "$bytes bytes under the $label media type fail the pull naming the layer and both"
done
