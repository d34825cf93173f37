#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A sandbox's record pins the image digest its reference resolved to at create (migration 002).
# When the tag then moves (another image pushed to it and pulled again), the old image has no
# name left, yet `nook image prune` keeps it while a sandbox pins it, `nook image rm` of its
# digest is refused naming the sandbox, and a sticky sandbox started again runs on the image
# its kept writable layer was made on.  Removing the sandbox releases the image.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
img_require
plan 18

img_start_registry plain
export NOOK_INSECURE_REGISTRIES="$REG_plain"
ref="$REG_plain/test/pin:latest"
bb=$(img_busybox_entries)

push_version() {
        img_build "$IMG_WORK/pin-$1" t <<JSON
{"layers": [$bb, [{"name":"etc/version","data":"$1\n"}]], "config": {"Env": ["PATH=/bin"]}}
JSON
        img_push "$IMG_WORK/pin-$1" t "$ref" || bail_out "push of $1 failed"
}

push_version one
run_nook image pull --quiet "$ref"
is "$status" 0 "pull the tag"
d1=$out

run_nook create pinbox --sticky --image "$ref"
is "$status" 0 "create a sticky sandbox from the tag"
run_nook inspect pinbox
like "$out" "\"imageDigest\": \"$d1\"" "nook inspect shows the pinned digest"
run_nook exec pinbox -- /bin/sh -c 'echo kept >/root/state; cat /etc/version'
is "$out" "one" "it runs on the first image"
run_nook create other --image "$ref"
is "$status" 0 "and a running ephemeral one"
run_nook stop pinbox
is "$status" 0 "stop the sticky sandbox"

push_version two
run_nook image pull --quiet "$ref"
d2=$out
isnt "$d2" "$d1" "the tag moved: pulling it again gives another digest"

run_nook image prune
is "$status" 0 "prune after the tag moved"
run_nook image inspect "$d1"
is "$status" 0 "the old image, now without a name, is kept: sandboxes pin it"

run_nook start pinbox
is "$status" 0 "start the sticky sandbox again"
run_nook exec pinbox -- /bin/sh -c 'cat /etc/version /root/state'
is "$out" "$(printf 'one\nkept')" "it runs on the image its kept layer was made on, with its files"
run_nook exec other -- /bin/cat /etc/version
is "$out" "one" "the running ephemeral sandbox still reads its image's files after prune"

expect_fail 1 "nook image rm of the pinned digest" image rm "$d1"
like "$err" "in use by sandbox '(other|pinbox)'" "the refusal names the sandbox"

# a new sandbox from the tag gets the new image; the pins go with their sandboxes
run_nook run --image "$ref" -- /bin/cat /etc/version
is "$out" "two" "a new sandbox from the tag runs the new image"
"$NOOK" rm pinbox other >/dev/null 2>&1 || diag "rm failed"
run_nook image prune
is "$status" 0 "prune once no sandbox pins the old image"
run_nook image inspect "$d1"
isnt "$status" 0 "the old image is gone"
run_nook image inspect "$d2"
is "$status" 0 "the tagged image stays"
