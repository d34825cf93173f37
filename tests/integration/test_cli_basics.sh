#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CLI's own surface: help, version, unknown commands, name rules. Needs no sandbox.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 19

run_nook --help
is "$status" 0 "nook --help exits 0"
like "$out" "(^|[[:space:]])run([[:space:]]|$)" "nook --help lists the run command"

run_nook --version
is "$status" 0 "nook --version exits 0"
like "$out" "[0-9]+\.[0-9]+\.[0-9]+" "nook --version prints a version number"

expect_fail 2 "an unknown command is a usage error" frobnicate-xyz
like "$err" "frobnicate-xyz" "the error names the unknown command"

# Hostile sandbox names are refused by the name rule before anything touches the disk.
for name in "../x" "A" ""; do
        run_nook ws path "$name"
        if [[ $status != 0 && $status != 124 ]]; then
                ok "nook ws path '$name' is refused"
        else
                not_ok "nook ws path '$name' is refused" "status: $status" "stdout: $out"
        fi
        like "$err" "name must be" "the refusal of '$name' states the name rule"
done
is "$(find "$NOOK_HOME" -mindepth 1 -path "$NOOK_HOME/workspaces/*" 2>/dev/null)" "" \
        "refused names created no workspace"

# libcurl, libarchive and libcrypto are linked by the image module, libnook-image.so, which
# libnook loads on first use only (src/image/module.h): a command that pulls nothing maps none
# of them (LD_DEBUG lists every object the dynamic linker loads).
LD_DEBUG=files "$NOOK" ls >/dev/null 2>"$NOOK_HOME/ld.txt"
is "$(grep -oE 'file=[^ ]*(libcurl|libarchive|libcrypto)[^ ]*' "$NOOK_HOME/ld.txt" | sort -u)" "" \
        "nook ls loads neither libcurl, libarchive nor libcrypto"
grep -q "file=libsqlite3" "$NOOK_HOME/ld.txt" && ok "LD_DEBUG saw the libraries nook ls does load" ||
        not_ok "LD_DEBUG saw the libraries nook ls does load" "$(head -5 "$NOOK_HOME/ld.txt")"
is "$(grep -oE 'file=[^ ]*libnook-image[^ ]*' "$NOOK_HOME/ld.txt" | sort -u)" "" "nook ls does not load the image module"
# A command that needs the image store loads the module, and with it libarchive.
LD_DEBUG=files "$NOOK" image inspect no-such-image-xyz >/dev/null 2>"$NOOK_HOME/ld.txt"
grep -qE 'file=[^ ]*libnook-image\.so.*generating link map' "$NOOK_HOME/ld.txt" &&
        grep -qE 'file=libarchive' "$NOOK_HOME/ld.txt" && ok "nook image inspect loads the image module and libarchive" ||
        not_ok "nook image inspect loads the image module and libarchive" "$(grep -E 'libnook|libarch' "$NOOK_HOME/ld.txt" | head -5)"
# A missing module is a broken installation, said as such (not a crash without a word).  It
# aborts on purpose: no core file.
ulimit -c 0
NOOK_IMAGE_MODULE=/nonexistent/libnook-image.so run_nook image inspect no-such-image-xyz
[[ $status != 0 ]] && ok "a missing image module fails the command" || not_ok "a missing image module fails the command" "status 0"
like "$err" "cannot load /nonexistent/libnook-image.so.*install the 'nook' package" "the error names the module and what to do"
