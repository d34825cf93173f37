#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Concurrent pulls from separate processes (issue #4): two `nook image pull` of the same
# multi-layer image at once both succeed and fetch each blob from the registry exactly once
# (counted in docker-registry's access log, which it writes for every request even at log
# level error); then four at once of another image sharing a layer leave a consistent store.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
img_require
plan 19

img_start_registry plain
export NOOK_INSECURE_REGISTRIES="$REG_plain"
reglog="$IMG_WORK/reg-plain/log"

bb=$(img_busybox_entries)
big=$(python3 -c 'import json; print(json.dumps([{"name": "opt/big%d" % i, "data": ("%d" % i) * 400000} for i in range(4)]))')
cat >"$IMG_WORK/conc.json" <<JSON
{"layers": [$bb, [{"name":"opt","type":"dir"}], $big,
            [{"name":"etc/marker","data":"conc-a\n"}], [{"name":"etc/motd","data":"top\n"}]]}
JSON
img_build "$IMG_WORK/conc" a <"$IMG_WORK/conc.json"
img_push "$IMG_WORK/conc" a "$REG_plain/test/conc:a" || bail_out "push failed"

# shares the busybox layer with the first image, and brings three of its own
cat >"$IMG_WORK/conc2.json" <<JSON
{"layers": [$bb, [{"name":"etc/marker","data":"conc-b\n"}], [{"name":"etc/b1","data":"b1\n"}],
            [{"name":"etc/b2","data":"b2\n"}]]}
JSON
img_build "$IMG_WORK/conc2" b <"$IMG_WORK/conc2.json"
img_push "$IMG_WORK/conc2" b "$REG_plain/test/conc2:b" || bail_out "push failed"

# blob_gets REPO: "<count> <digest>" for every successful blob GET in the access log
blob_gets() {
        grep -o "\"GET /v2/$1/blobs/sha256:[0-9a-f]\{64\} HTTP/[0-9.]*\" 200" "$reglog" |
                sed 's|.*/blobs/\(sha256:[0-9a-f]*\) .*|\1|' | sort | uniq -c | awk '{print $1, $2}'
}
# every blob the manifest of REPO:TAG names (config + layers)
manifest_blobs() {
        skopeo inspect --raw --tls-verify=false "docker://$REG_plain/$1" |
                python3 -c 'import json,sys; m=json.load(sys.stdin); print("\n".join(sorted([m["config"]["digest"]] + [l["digest"] for l in m["layers"]])))'
}
# pull_n N REF: N pulls at once; sets statuses ("0 0 ...") and keeps each one's stderr
pull_n() {
        local n=$1 ref=$2 i pids=()
        : >"$IMG_WORK/barrier"
        for i in $(seq 1 "$n"); do
                (
                        while [[ ! -s "$IMG_WORK/barrier" ]]; do sleep 0.01; done
                        exec timeout 120 "$NOOK" image pull --quiet "$ref" >"$IMG_WORK/pull$i.out" 2>"$IMG_WORK/pull$i.err"
                ) &
                pids+=($!)
        done
        echo go >"$IMG_WORK/barrier"
        statuses=""
        for i in "${!pids[@]}"; do
                wait "${pids[$i]}"
                statuses+="$? "
        done
        statuses=${statuses% }
}

before=$(blob_gets test/conc)
is "$before" "" "nothing fetched the image's blobs before the pulls"
pull_n 2 "$REG_plain/test/conc:a"
is "$statuses" "0 0" "two concurrent pulls of the same image both succeed" \
        "$(cat "$IMG_WORK"/pull*.err)"
is "$(cat "$IMG_WORK/pull1.out")" "$(cat "$IMG_WORK/pull2.out")" "both print the same manifest digest"

want=$(manifest_blobs test/conc:a)
got=$(blob_gets test/conc)
is "$(echo "$want" | wc -l)" 6 "the manifest names a config and five layers"
is "$(awk '{print $2}' <<<"$got" | sort)" "$want" "every blob of the image was fetched"
is "$(awk '$1 != 1' <<<"$got")" "" "each blob was fetched from the registry exactly once" "$got"

run_nook run --image "$REG_plain/test/conc:a" -- /bin/sh -c 'cat /etc/marker /etc/motd; wc -c < /opt/big3'
is "$status" 0 "the image pulled concurrently runs"
is "$out" "$(printf 'conc-a\ntop\n400000')" "its file tree is complete"

# a later pull of the same image downloads no blob again
run_nook image pull --quiet "$REG_plain/test/conc:a"
is "$status" 0 "a third pull"
is "$(blob_gets test/conc)" "$got" "a pull of an image already stored fetches no blob"

# four at once of an image sharing the busybox layer with the first
pull_n 4 "$REG_plain/test/conc2:b"
is "$statuses" "0 0 0 0" "four concurrent pulls all succeed" "$(cat "$IMG_WORK"/pull*.err)"
got2=$(blob_gets test/conc2)
is "$(awk '$1 != 1' <<<"$got2")" "" "each blob was fetched at most once by four pulls" "$got2"
shared=$(sed -n 2p <<<"$(skopeo inspect --raw --tls-verify=false "docker://$REG_plain/test/conc2:b" |
        python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["config"]["digest"]); print(m["layers"][0]["digest"])')")
unlike "$got2" "$shared" "the layer already in the store was not fetched again"
run_nook run --image "$REG_plain/test/conc2:b" -- /bin/cat /etc/marker /etc/b1 /etc/b2
is "$out" "$(printf 'conc-b\nb1\nb2')" "the image pulled four times at once runs"

# nothing half-made is left, and the records are consistent
left=$(find "$NOOK_HOME/images/tmp" "$NOOK_HOME/images/layers" -mindepth 1 -maxdepth 2 -name '.tmp-*' -o \
        -path "$NOOK_HOME/images/tmp/*" | wc -l)
is "$left" 0 "no temporary download or unpack directory is left"
run_nook image ls
is "$(grep -c "test/conc" <<<"$out")" 2 "image ls lists both images once"
check=$(python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute("pragma integrity_check").fetchone()[0], len(c.execute("pragma foreign_key_check").fetchall()))' "$NOOK_HOME/nook.db")
is "$check" "ok 0" "the state database passes its integrity and foreign key checks"

# one lock file per blob and layer ever fetched: prune (holding the store's gc lock) clears them
ls "$NOOK_HOME/images/locks" | grep -qE '^(blob|layer)-' ||
        diag "no per-blob lock file to clear (the pulls above should have left some)"
run_nook image prune
is "$status" 0 "prune after the concurrent pulls"
is "$(ls "$NOOK_HOME/images/locks" | grep -cE '^(blob|layer)-')" 0 "prune leaves no per-blob or per-layer lock file"
