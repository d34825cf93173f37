#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Image files: `nook image import` of an OCI layout directory, an oci-archive and a docker save
# tar (made by skopeo from an image in a local docker-registry), run in a sandbox and compared
# with the pulled image; `nook image export` in each format, read back by skopeo and by import
# (same digest); hostile and damaged inputs refused leaving nothing behind.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
img_require
plan 77

img_start_registry plain
export NOOK_INSECURE_REGISTRIES="$REG_plain"
S=(--src-tls-verify=false)
W="$IMG_WORK/fmt"
mkdir -p "$W"

bb=$(img_busybox_entries)
extra='[{"name":"opt","type":"dir"},{"name":"opt/hello","data":"hello from the image\n"},{"name":"etc/motd","data":"formats\n"}]'
cat >"$IMG_WORK/busy.json" <<JSON
{"layers": [$bb, $extra], "config": {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin", "FOO=bar"]}}
JSON
img_build "$IMG_WORK/busy" v1 <"$IMG_WORK/busy.json"
ref="$REG_plain/test/busy:v1"
img_push "$IMG_WORK/busy" v1 "$ref" || bail_out "push failed"
regdigest=$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$ref") || bail_out "skopeo inspect failed"

skopeo copy --quiet "${S[@]}" "docker://$ref" "oci:$W/oci:$ref" >/dev/null 2>&1 || bail_out "skopeo copy to oci failed"
skopeo copy --quiet "${S[@]}" "docker://$ref" "oci-archive:$W/oci.tar:$ref" >/dev/null 2>&1 ||
        bail_out "skopeo copy to oci-archive failed"
skopeo copy --quiet "${S[@]}" "docker://$ref" "docker-archive:$W/docker.tar:localhost/fmt/saved:1" >/dev/null 2>&1 ||
        bail_out "skopeo copy to docker-archive failed"

# the file tree of an image, as a sandbox sees it
tree_of() {
        "$NOOK" run --image "$1" -- /bin/sh -c 'for d in /bin /etc /opt; do find $d; done | sort; cat /opt/hello' 2>&1 |
                md5sum
}
digest_of() {
        "$NOOK" image inspect --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])'
}

run_nook image pull --quiet "$ref"
is "$status" 0 "pull the reference image"
want_tree=$(tree_of "$ref")

# ---- import, each format ----
run_nook image rm "$ref"
run_nook image import --quiet "$W/oci"
is "$status" 0 "import an OCI layout directory (detected)"
is "$out" "$regdigest" "the layout's manifest keeps the registry's digest"
run_nook image ls
like "$out" "$REG_plain/test/busy:v1" "the image is named by its ref.name annotation"
run_nook run --image "$ref" -- /bin/sh -c 'cat /opt/hello; echo FOO=$FOO'
like "$out" "hello from the image" "a command runs in the imported image"
like "$out" "FOO=bar" "the config's Env came along"
is "$(tree_of "$ref")" "$want_tree" "the imported file tree is the pulled one"

run_nook image import --quiet --name localhost/fmt/ociarch:1 "$W/oci.tar"
is "$status" 0 "import an oci-archive (detected)"
is "$out" "$regdigest" "oci-archive: same digest as the registry"
is "$(tree_of localhost/fmt/ociarch:1)" "$want_tree" "oci-archive: same file tree"

run_nook image import --quiet --name localhost/fmt/prefixed:1 "oci-archive:$W/oci.tar:$ref"
is "$status" 0 "import with a skopeo-style transport prefix and a name selector"

run_nook image import --quiet "$W/docker.tar"
is "$status" 0 "import a docker save tar (old layout), named by its RepoTag"
saved_digest=$out
is "$(tree_of localhost/fmt/saved:1)" "$want_tree" "docker-archive: same file tree"
run_nook image import --quiet "$W/docker.tar"
is "$out" "$saved_digest" "the manifest made for a docker save tar is deterministic"
run_nook run --image localhost/fmt/saved:1 -- /bin/echo from-docker-archive
is "$out" "from-docker-archive" "a command runs in the docker-archive image"

run_nook image import --quiet --format docker-archive "$W/oci.tar"
is "$status" 1 "--format docker-archive on an oci-archive fails"
like "$err" "manifest.json' is missing" "the error names the missing manifest.json"
run_nook image import --quiet --format oci "$W/oci.tar"
like "$err" "not a directory" "--format oci on a file says an OCI layout is a directory"
run_nook image import --quiet --format tarball "$W/oci.tar"
like "$err" "Unknown image format 'tarball'" "an unknown --format is named"

# ---- export, each format ----
E="$IMG_WORK/exp"
mkdir -p "$E"
chmod 0777 "$E"
for f in oci oci-archive docker-archive; do
        run_nook image export "$ref" -o "$E/$f" --format "$f"
        is "$status" 0 "export as $f"
        sk=$(skopeo inspect --format '{{.Digest}}' "$f:$E/$f" 2>&1)
        is "$?" 0 "skopeo inspect $f: reads the export${sk:+ ($sk)}"
        run_nook image import --quiet --name "localhost/fmt/back-$f:1" "$E/$f"
        is "$out" "$regdigest" "import(export as $f) gives the same digest"
done
is "$(tree_of localhost/fmt/back-docker-archive:1)" "$want_tree" "the re-imported docker-archive has the same tree"
skopeo copy --quiet --dest-tls-verify=false "oci-archive:$E/oci-archive" "docker://$REG_plain/test/copied:1" >/dev/null 2>&1
is "$?" 0 "skopeo copy from the oci-archive export to the registry"
skopeo copy --quiet --dest-tls-verify=false "docker-archive:$E/docker-archive" "docker://$REG_plain/test/copied2:1" \
        >/dev/null 2>&1
is "$?" 0 "skopeo copy from the docker-archive export to the registry"
run_nook image pull --quiet "$REG_plain/test/copied:1"
is "$out" "$regdigest" "pulled back from the registry: same digest"
# '-': the tar on stdout and from stdin (docker save | docker load); no temporary file is left
"$NOOK" image export "$ref" --format docker-archive -o - >"$E/stdout.tar" 2>"$E/stdout.err"
is "$?:$(cat "$E/stdout.err")" "0:" "export -o - writes the tar to stdout, nothing else"
"$NOOK" image import --quiet --name localhost/fmt/fromstdin:1 - <"$E/stdout.tar" >"$E/stdin.out" 2>&1
is "$?:$(cat "$E/stdin.out")" "0:$regdigest" "import - reads it from stdin: the same digest"
run_nook image export "$ref" --format oci -o -
like "$status:$err" "^2:.*--format oci is a directory" "export --format oci -o - is a usage error"
is "$(find "${TMPDIR:-/var/tmp}" -maxdepth 1 -name 'nook-stdio.*' -user "$(id -u)" 2>/dev/null)" "" "no temporary folder is left"
run_nook image export "$ref" --format docker-archive -o "$E/again.tar"
like "$(tar -tf "$E/again.tar" | sort | tr '\n' ' ')" "blobs/sha256/.* index.json manifest.json oci-layout" \
        "docker-archive holds an OCI layout and manifest.json"

run_nook image import --quiet --format docker-archive --name localhost/fmt/newsave:1 "$E/docker-archive"
is "$status" 0 "the newer docker save shape read through its manifest.json (--format docker-archive)"
run_nook run --image localhost/fmt/newsave:1 -- /bin/cat /opt/hello
is "$out" "hello from the image" "a command runs in it (gzip layers named by manifest.json)"

# an index.json entry that is itself an index: this host's platform is picked, as a pull does
cat >"$IMG_WORK/multi.json" <<JSON
{"layers": [$bb], "platforms": ["arm64", "amd64", "s390x"], "config": {"Cmd": ["/bin/sh"]}}
JSON
img_build "$W/multi" localhost/fmt/multi:1 <"$IMG_WORK/multi.json"
run_nook image import --quiet "$W/multi"
is "$status" 0 "import a layout whose entry is a multi-platform index"
run_nook image inspect localhost/fmt/multi:1
like "$out" '"platform": "linux/amd64"' "the amd64 manifest was chosen"
# two images in one layout: one must be chosen by name
cp -r "$W/oci" "$W/two"
skopeo copy --quiet "oci:$W/multi:localhost/fmt/multi:1" "oci:$W/two:localhost/fmt/second:1" >/dev/null 2>&1
run_nook image import --quiet "$W/two"
like "$err" "lists 2 images .*choose one with oci:DIR:NAME" "a layout with two images asks which one"
run_nook image import --quiet "oci:$W/two:localhost/fmt/second:1"
is "$status" 0 "oci:DIR:NAME picks one of them"

run_nook image export "$ref" -o "$E/oci-archive"
is "$status" 1 "export refuses an existing path"
like "$err" "exists: use --force" "the refusal says --force"
echo keep >"$E/victim"
ln -s "$E/victim" "$E/link"
run_nook image export "$ref" -o "$E/link"
is "$status" 1 "export refuses a symlink at the destination"
run_nook image export --force "$ref" -o "$E/link"
is "$status" 0 "export --force replaces it"
ok_if() { if "$@"; then _tap_result ok "$desc"; else _tap_result not_ok "$desc"; fi; }
desc="the symlink was replaced, not followed" ok_if test ! -L "$E/link" -a "$(cat "$E/victim")" = keep
run_nook image export --force --format oci "$ref" -o "$E/oci"
is "$status" 0 "export --force over a directory"
mkdir -p "$E/project/src" && echo mine >"$E/project/src/file"
run_nook image export --force "$ref" -o "$E/project"
like "$status:$err" "^1:.*not an OCI image layout" "export --force refuses to replace a directory that is no export"
is "$(cat "$E/project/src/file" 2>/dev/null)" "mine" "and the directory is untouched"
(cd "$E" && "$NOOK" image export "$ref" -o rel.tar >/dev/null 2>&1 &&
        "$NOOK" image export --force "$ref" -o rel.tar >/dev/null 2>"$E/rel.err")
is "$?:$(cat "$E/rel.err")" "0:" "export --force to a relative path works"
is "$(ls "$E" | grep -c nook-tmp)" "0" "no temporary file left by export"

# ---- hostile and damaged input ----
H="$IMG_WORK/hostile"
mkdir -p "$H"
blobs_before=$(find "$NOOK_HOME/images/blobs" "$NOOK_HOME/images/layers" -mindepth 2 -maxdepth 2 | sort | md5sum)
images_before=$("$NOOK" image ls --json | md5sum)

# hostile_tar NAME PY: a tar from Python's tarfile (t is the open archive; add(name, data))
hostile_tar() {
        python3 - "$H/$1" "$W/oci" "$2" <<'PY'
import io, os, sys, tarfile
out, layout, body = sys.argv[1], sys.argv[2], sys.argv[3]
t = tarfile.open(out, "w")
def add(name, data=b"x", type=tarfile.REGTYPE, link=""):
    ti = tarfile.TarInfo(name); ti.type = type; ti.linkname = link; ti.size = len(data) if type == tarfile.REGTYPE else 0
    t.addfile(ti, io.BytesIO(data) if type == tarfile.REGTYPE else None)
def layout_files(skip=()):
    for root, _, files in os.walk(layout):
        for f in files:
            p = os.path.relpath(os.path.join(root, f), layout)
            if p not in skip:
                add(p, open(os.path.join(root, f), "rb").read())
exec(body)
t.close()
PY
}
# refused NAME ERROR_RE SOURCE [ARGS]: import fails with a message matching ERROR_RE
refused() {
        local what=$1 re=$2
        shift 2
        run_nook image import --quiet --name localhost/fmt/hostile:1 "$@"
        if [[ $status == 1 && $err =~ $re ]]; then
                _tap_result ok "refused: $what"
        else
                _tap_result not_ok "refused: $what"
                diag "status=$status err=$err"
        fi
}

hostile_tar dotdot.tar 'layout_files(); add("../escape")'
refused "a tar member with '..'" "member '../escape' leaves the archive" "$H/dotdot.tar"
desc="nothing written outside the temporary directory" ok_if test ! -e "$NOOK_HOME/images/escape"
hostile_tar abs.tar 'layout_files(); add("/tmp/nook-abs-escape")'
refused "an absolute tar member" "leaves the archive" "$H/abs.tar"
hostile_tar symlink.tar 'add("oci-layout", b"{\"imageLayoutVersion\":\"1.0.0\"}"); add("index.json", type=tarfile.SYMTYPE, link="/etc/passwd")'
refused "a symlink member used as a document" "'index.json' in the image is a symlink" "$H/symlink.tar"
hostile_tar hardlink.tar 'layout_files(); add("x", type=tarfile.LNKTYPE, link="index.json")'
refused "a hard link member" "is a hard link" "$H/hardlink.tar"
# a sparse member: 8 GiB declared, a few KiB in the tar (GNU tar --sparse)
mkdir -p "$H/sparse" && truncate -s 8G "$H/sparse/big" &&
        tar --sparse -C "$H/sparse" -cf "$H/sparse.tar" big && rm -f "$H/sparse/big"
refused "a sparse member" "'big' is a sparse file" "$H/sparse.tar"
# a member that is mostly zeros, gzip'ed: 1 GiB in ~1 MiB, far beyond the archive's size
python3 - "$H/bomb.tar.gz" <<'PY'
import gzip, sys, tarfile
class Zeros:
    def __init__(self, n): self.n = n
    def read(self, k=-1):
        k = self.n if k < 0 else min(k, self.n); self.n -= k; return bytes(k)
with gzip.open(sys.argv[1], "wb", compresslevel=1) as g:
    t = tarfile.open(fileobj=g, mode="w"); ti = tarfile.TarInfo("zeros"); ti.size = 1 << 30
    t.addfile(ti, Zeros(ti.size)); t.close()
PY
refused "a compressed tar that expands far beyond its size" "expands the archive far beyond its own size" \
        --format oci-archive "$H/bomb.tar.gz"

# a layer nook has not stored yet (a stored one is not read again, as with a pull)
echo '{"layers": [[{"name":"fresh","data":"a layer of its own\n"}]], "config": {}}' | img_build "$H/fresh" fresh
cp -r "$H/fresh" "$H/bad-digest"
layer=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]+"/index.json"))["manifests"][0]["digest"].split(":")[1]; print(json.load(open(sys.argv[1]+"/blobs/sha256/"+m))["layers"][0]["digest"])' "$H/bad-digest")
python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=0xff; open(p,"wb").write(b)' \
        "$H/bad-digest/blobs/sha256/${layer#sha256:}"
refused "a blob whose content does not match its digest" "Digest mismatch for blob $layer" "$H/bad-digest"

cp -r "$H/fresh" "$H/symlink-blob"
rm "$H/symlink-blob/blobs/sha256/${layer#sha256:}"
ln -s "$H/fresh/blobs/sha256/${layer#sha256:}" "$H/symlink-blob/blobs/sha256/${layer#sha256:}"
refused "a symlink as blob" "is a symlink" "$H/symlink-blob"

cp -r "$H/fresh" "$H/missing-blob"
rm "$H/missing-blob/blobs/sha256/${layer#sha256:}"
refused "a missing blob" "blobs/sha256/${layer#sha256:}' is missing" "$H/missing-blob"

cp -r "$W/oci" "$H/malformed"
echo '{"manifests": [' >"$H/malformed/index.json"
refused "a malformed index.json" "Invalid index.json" "$H/malformed"

cp -r "$W/oci" "$H/unknown-mt"
sed -i 's|application/vnd.oci.image.manifest.v1+json|application/x-nook-unknown|' "$H/unknown-mt/index.json"
refused "an unknown media type" "media type 'application/x-nook-unknown'" "$H/unknown-mt"

cp -r "$W/oci" "$H/ghost"
python3 -c 'import json,sys; p=sys.argv[1]+"/index.json"; x=json.load(open(p)); x["manifests"][0]["digest"]="sha256:"+"0"*64; json.dump(x,open(p,"w"))' "$H/ghost"
refused "index.json naming a blob that is not there" "is missing from the image" "$H/ghost"

hostile_tar dm-dotdot.tar 'add("manifest.json", b"[{\"Config\":\"../../etc/passwd\",\"RepoTags\":[],\"Layers\":[]}]")'
refused "manifest.json with a path outside the archive" "path '../../etc/passwd' in 'Config' leaves the archive" "$H/dm-dotdot.tar"
hostile_tar dm-abs.tar 'add("manifest.json", b"[{\"Config\":\"c.json\",\"RepoTags\":[],\"Layers\":[\"/etc/passwd\"]}]"); add("c.json", b"{}")'
refused "manifest.json with an absolute layer path" "path '/etc/passwd' in 'Layers' leaves the archive" "$H/dm-abs.tar"
hostile_tar dm-bad.tar 'add("manifest.json", b"[{\"Config\": 5}]")'
refused "a malformed manifest.json" "field 'Config' must be a string" "$H/dm-bad.tar"
hostile_tar dm-missing.tar 'add("manifest.json", b"[{\"Config\":\"c.json\",\"RepoTags\":[],\"Layers\":[\"l.tar\"]}]"); add("c.json", b"{}")'
refused "manifest.json naming a missing layer" "'l.tar' is missing" "$H/dm-missing.tar"
hostile_tar dm-huge.tar 'add("manifest.json", b" " * (5 << 20) + b"[]")'
refused "a huge manifest.json" "larger than 4194304 bytes" "$H/dm-huge.tar"

size=$(stat -c %s "$W/oci.tar")
head -c $((size / 2)) "$W/oci.tar" >"$H/truncated.tar"
refused "a truncated archive" "Truncated|truncated|missing" "$H/truncated.tar"
head -c 100000 /dev/urandom >"$H/noise"
refused "a file that is no tar" "not a .*tar archive" "$H/noise"

# a tag-only ref.name and no --name: asks for one
cp -r "$W/oci" "$H/tag-only"
sed -i "s|\"$ref\"|\"v1\"|" "$H/tag-only/index.json"
run_nook image import --quiet "$H/tag-only"
like "$err" "only by the tag 'v1'.*--name" "a tag-only annotation asks for --name"

is "$(find "$NOOK_HOME/images/blobs" "$NOOK_HOME/images/layers" -mindepth 2 -maxdepth 2 | sort | md5sum)" \
        "$blobs_before" "refused imports stored no blob and no layer"
is "$("$NOOK" image ls --json | md5sum)" "$images_before" "refused imports recorded no image"
is "$(find "$NOOK_HOME/images/tmp" -mindepth 1 | wc -l)" "0" "no temporary directory left behind"
