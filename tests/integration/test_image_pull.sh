#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Registry images end to end: a real docker-registry on loopback (plain, htpasswd, TLS with a
# test CA), images built here from busybox-static and pushed with skopeo, pulled by nook and
# run in a sandbox: layers, whiteouts, opaque directories, env, default command, multi-arch
# index, credentials, removal rules and prune.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
img_require
plan 27

img_start_registry plain
img_start_registry auth htpasswd
img_start_registry tls tls
export NOOK_INSECURE_REGISTRIES="$REG_plain,$REG_auth"

bb=$(img_busybox_entries)
layer2='[{"name":"etc/motd","data":"from layer 2\n"},{"name":"etc/.wh.group"},
  {"name":"opt","type":"dir"},{"name":"opt/d","type":"dir"},{"name":"opt/d/.wh..wh..opq"},{"name":"opt/d/new","data":"new\n"},
  {"name":"opt/keep","data":"keep\n"}]'
layer1_extra='[{"name":"opt","type":"dir"},{"name":"opt/d","type":"dir"},{"name":"opt/d/old","data":"old\n"},{"name":"etc/motd","data":"from layer 1\n"}]'
cat >"$IMG_WORK/busy.json" <<JSON
{"layers": [$bb, $layer1_extra, $layer2],
 "config": {"Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo default command ran"], "Env": ["PATH=/bin", "FOO=from-image"], "WorkingDir": "/opt"}}
JSON
img_build "$IMG_WORK/busy" v1 <"$IMG_WORK/busy.json"
img_push "$IMG_WORK/busy" v1 "$REG_plain/test/busy:v1" || bail_out "push failed"

ref="$REG_plain/test/busy:v1"
run_nook image pull --quiet "$ref"
is "$status" 0 "anonymous pull from the local registry"
like "$out" "^sha256:[0-9a-f]{64}$" "pull prints the manifest digest"

run_nook image ls
like "$out" "$REG_plain/test/busy:v1" "image ls lists the pulled name"

run_nook image inspect "$ref"
like "$out" '"defaultCommand": \[[^]]*"/bin/sh",[^]]*"-c",[^]]*"echo default command ran"' \
        "inspect shows Entrypoint + Cmd as the default command"

run_nook run --image "$ref" -- /bin/sh -c 'cat /etc/motd; echo FOO=$FOO'
is "$status" 0 "nook run --image REF runs a command in the pulled image"
like "$out" "from layer 2" "the topmost layer's file wins"
like "$out" "FOO=from-image" "the image's Env reaches the command"

run_nook run --image "$ref" -- /bin/sh -c 'test -e /etc/group && echo group-present || echo group-gone'
is "$out" "group-gone" "a .wh. whiteout hides the lower layer's file"
run_nook run --image "$ref" -- /bin/sh -c 'ls /opt/d | tr "\n" " "; cat /opt/keep'
like "$out" "^new keep" "an opaque directory hides the lower layer's entries and keeps its own"

want=$(busybox --list | grep -vc '^busybox$')
run_nook run --image "$ref" -- /bin/sh -c 'ls /bin | grep -vc "^busybox$"'
is "$out" "$want" "the file tree has every busybox applet that was pushed"

run_nook run --image "$ref" -- /bin/busybox stat -c '%u:%g' /bin/busybox /etc/passwd
is "$(echo "$out" | sort -u)" "0:0" "image files are owned by the sandbox's root"

# the default command: exposed through inspect; run it the way `nook run IMAGE` will
cmd=$("$NOOK" image inspect --json "$ref" | python3 -c 'import json,sys; print("\0".join(json.load(sys.stdin)["defaultCommand"]))' | tr '\0' '\n')
mapfile -t argv <<<"$cmd"
run_nook run --image "$ref" -- "${argv[@]}"
is "$out" "default command ran" "the default command runs"

# a second pull shares every layer (nothing downloaded again)
before=$(find "$NOOK_HOME/images/blobs" -type f | wc -l)
run_nook image pull --quiet "$ref"
is "$(find "$NOOK_HOME/images/blobs" -type f | wc -l)" "$before" "a second pull stores nothing new"

# multi-arch index: the host's platform is picked
cat >"$IMG_WORK/multi.json" <<JSON
{"layers": [$bb], "platforms": ["arm64", "amd64", "s390x"], "config": {"Cmd": ["/bin/sh"]}}
JSON
img_build "$IMG_WORK/multi" m <"$IMG_WORK/multi.json"
img_push "$IMG_WORK/multi" m "$REG_plain/test/multi:1" || bail_out "push of the index failed"
run_nook run --image "$REG_plain/test/multi:1" -- /bin/echo multi-ok
is "$out" "multi-ok" "a multi-arch index resolves to this host's platform"
run_nook image inspect "$REG_plain/test/multi:1"
like "$out" '"platform": "linux/amd64"' "the amd64 manifest was chosen"

# credentials: 401 without, explicit creds, then an auth file
img_push "$IMG_WORK/busy" v1 "$REG_auth/test/busy:v1" --dest-creds nookuser:n0ok-secret || bail_out "push to auth registry failed"
expect_fail 1 "a registry with auth refuses an anonymous pull" image pull --quiet "$REG_auth/test/busy:v1"
like "$err" "Registry '$REG_auth' refused access.*needs credentials" "the 401 message names the registry and what to do"
run_nook image pull --quiet --creds nookuser:n0ok-secret "$REG_auth/test/busy:v1"
is "$status" 0 "pull with --creds"
unlike "$(cat "$NOOK_HOME"/nook.db* 2>/dev/null | strings)" "n0ok-secret" "the password is not in the state database"
printf '{"auths":{"%s":{"auth":"%s"}}}' "$REG_auth" "$(printf nookuser:n0ok-secret | base64)" >"$IMG_WORK/auth.json"
"$NOOK" image rm "$REG_auth/test/busy:v1" >/dev/null
REGISTRY_AUTH_FILE="$IMG_WORK/auth.json" run_nook image pull --quiet "$REG_auth/test/busy:v1"
is "$status" 0 "pull with credentials from REGISTRY_AUTH_FILE"

# TLS with a test CA: refused without it, accepted with --ca-file
img_push "$IMG_WORK/busy" v1 "$REG_tls/test/busy:v1" || bail_out "push to TLS registry failed"
expect_fail 1 "an unknown CA is refused" image pull --quiet "$REG_tls/test/busy:v1"
run_nook image pull --quiet --ca-file "$IMG_WORK/ca/ca.crt" "$REG_tls/test/busy:v1"
is "$status" 0 "TLS pull with --ca-file"

# removal: refused while a sandbox uses the image, then prune frees the files
run_nook create --image "$ref" user1
is "$status" 0 "create a sandbox from the image"
expect_fail 1 "removing an image in use" image rm "$ref"
like "$err" "in use by sandbox 'user1'" "the refusal names the sandbox"
"$NOOK" rm user1 >/dev/null 2>&1
for r in "$ref" "$REG_auth/test/busy:v1" "$REG_tls/test/busy:v1" "$REG_plain/test/multi:1"; do
        "$NOOK" image rm "$r" >/dev/null || diag "rm $r failed"
done
run_nook image prune
is "$status" 0 "prune"
left=$(find "$NOOK_HOME/images/blobs" "$NOOK_HOME/images/layers" -mindepth 2 -maxdepth 2 | wc -l)
is "$left" "0" "prune removed every blob and layer no image uses"
