#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The Debian package, end to end, as a user gets it (scripts/test's `deb` stage; needs root):
#   1. dpkg-buildpackage -b -us -uc in a clean copy of the tree (tracked and untracked files,
#      no build directories), and `meson install --destdir` of that build: the layout, the
#      soname, a program built against nook.pc, a man page per command;
#   2. apt-get install ./nook_<version>_<arch>.deb; `nook run -- echo hi`; `nook doctor`; a
#      sandbox's supervisor is /usr/libexec/nook-supervisor; `man -w nook`; bash completion of
#      `nook <TAB>`, of a flag and of a sandbox name from the store; `nook run` as the
#      unprivileged user nook-test when it exists (rootless);
#   3. apt-get remove (the sandbox's supervisor is stopped, every file of `dpkg -L` is gone,
#      /var/lib/nook kept) and apt-get purge (/var/lib/nook gone, the package unknown to dpkg).
# The package is purged on any exit (trap).  A /var/lib/nook that existed before is moved
# aside and put back; an installed nook package that this script did not install is never
# touched (the test is skipped).  The last line is "N passed, N failed[, N skipped]".

# ok and not_ok always return 0, so "A && ok || not_ok" is an if-then-else here; cleanup runs
# from the EXIT trap.
# shellcheck disable=SC2015,SC2317
set -uo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
n_pass=0 n_fail=0 n_skip=0
ok() { n_pass=$((n_pass + 1)); echo "ok - $1"; }
not_ok() {
        n_fail=$((n_fail + 1))
        echo "not ok - $1"
        [[ -n "${2:-}" ]] && while IFS= read -r l; do echo "#   $l"; done <<<"$2"
        return 0
}
check() { # check DESC CMD...: ok when CMD succeeds
        local desc=$1 out
        shift
        if out=$("$@" 2>&1); then ok "$desc"; else not_ok "$desc" "$out"; fi
}
finish() {
        local line="$n_pass passed, $n_fail failed"
        ((n_skip > 0)) && line+=", $n_skip skipped"
        echo "$line"
        ((n_fail == 0))
        exit
}
skip_all() {
        echo "skip - $1"
        if [[ "${NOOK_MUST_WORK:-0}" == 1 ]]; then n_fail=$((n_fail + 1)); else n_skip=$((n_skip + 1)); fi
        finish
}

[[ $(id -u) == 0 ]] || skip_all "installing a package needs root"
for tool in dpkg-buildpackage apt-get dpkg-deb readelf man; do
        command -v "$tool" >/dev/null || skip_all "$tool is missing (scripts/deps.sh installs it)"
done
if dpkg-query -W -f '${Status}' nook 2>/dev/null | grep -q installed; then
        skip_all "a nook package is installed already; this test would replace and purge it"
fi

# Each step is bounded; the whole file stays under 5 minutes (timeout in tests/package).
tmp=$(mktemp -d /var/tmp/nook-deb-test.XXXXXX)
installed=0
moved_state=""
cleanup() {
        if ((installed)); then
                DEBIAN_FRONTEND=noninteractive timeout 120 apt-get purge -y nook >"$tmp/cleanup.log" 2>&1 ||
                        echo "# cleanup: apt-get purge nook failed: $(tail -3 "$tmp/cleanup.log")"
        fi
        if [[ -n "$moved_state" ]]; then
                rm -rf /var/lib/nook
                mv "$moved_state" /var/lib/nook
        fi
        rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [[ -e /var/lib/nook ]]; then
        moved_state=$(mktemp -d /var/lib/nook.before-deb-test.XXXXXX)
        rmdir "$moved_state" && mv /var/lib/nook "$moved_state"
        echo "# /var/lib/nook existed: moved to $moved_state, put back at exit"
fi
# The installed nook alone: no build tree's supervisor, no other state folder.
unset NOOK_SUPERVISOR NOOK_HOME NOOK_BUILD_DIR NOOK_RUNTIME_DIR
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

# ---- 1. build from a clean copy ------------------------------------------------------------
copy=$tmp/nook
mkdir -p "$copy"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$src" && git ls-files -z --cached --others --exclude-standard |
                while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
                tar --null -T - -cf -) | tar -xf - -C "$copy"
else
        tar -C "$src" --exclude='./build*' --exclude=node_modules -cf - . | tar -xf - -C "$copy"
fi
version=$(dpkg-parsechangelog -l "$copy/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
deb=$tmp/nook_${version}_${arch}.deb
if (cd "$copy" && timeout 240 dpkg-buildpackage -b -us -uc) >"$tmp/build.log" 2>&1 && [[ -f $deb ]]; then
        ok "dpkg-buildpackage -b makes nook_${version}_${arch}.deb from a clean copy"
else
        not_ok "dpkg-buildpackage -b makes nook_${version}_${arch}.deb from a clean copy" "$(tail -20 "$tmp/build.log")"
        finish
fi
meson_version=$(sed -nE "s/^ *version *: *'([^']+)'.*/\1/p" "$copy/meson.build" | head -1)
[[ $version == "$meson_version" ]] && ok "debian/changelog's version is meson.build's ($version)" ||
        not_ok "debian/changelog's version ($version) is meson.build's ($meson_version)"
deps=$(dpkg-deb -f "$deb" Depends)
missing=""
for d in slirp4netns uidmap libseccomp2 libsqlite3-0 libjansson4 libnftables1 libcurl4 libarchive13 libssl3; do
        [[ ", $deps," == *", $d"[\ ,]* ]] || missing+=" $d"
done
[[ -z $missing ]] && ok "Depends names the runtime packages (shlibs and dlopen'd)" ||
        not_ok "Depends names the runtime packages (shlibs and dlopen'd)" "missing:$missing in: $deps"

# ---- meson install --destdir: the layout -----------------------------------------------------
objdir=$(find "$copy" -maxdepth 1 -type d -name 'obj-*' | head -1)
dest=$tmp/destdir
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
if [[ -n $objdir ]] && DESTDIR=$dest meson install -C "$objdir" --no-rebuild --quiet >"$tmp/install.log" 2>&1; then
        ok "meson install --destdir of the package build"
else
        not_ok "meson install --destdir of the package build" "$(tail -10 "$tmp/install.log" 2>/dev/null)"
fi
layout_missing=""
for f in usr/bin/nook usr/bin/nook-oci usr/libexec/nook-supervisor usr/libexec/nook-egress "usr/lib/$multiarch/libnook.so.0" "usr/lib/$multiarch/libnook.so" "usr/lib/$multiarch/nook/libnook-image.so" \
        usr/include/nook.h "usr/lib/$multiarch/pkgconfig/nook.pc" usr/share/man/man1/nook.1 usr/share/man/man1/nook-oci.1 \
        usr/share/bash-completion/completions/nook usr/share/zsh/vendor-completions/_nook \
        usr/share/fish/vendor_completions.d/nook.fish; do
        [[ -e $dest/$f ]] || layout_missing+=" $f"
done
[[ -z $layout_missing ]] && ok "layout: bin, libexec, lib + soname link, include, pkgconfig, man1, completions" ||
        not_ok "layout: bin, libexec, lib + soname link, include, pkgconfig, man1, completions" "missing:$layout_missing"
soname=$(readelf -d "$dest/usr/lib/$multiarch/libnook.so" 2>/dev/null | sed -nE 's/.*SONAME.*\[(.*)\]/\1/p')
[[ $soname == libnook.so.0 ]] && ok "libnook's soname is libnook.so.0" || not_ok "libnook's soname is libnook.so.0" "got '$soname'"
man_missing=""
while IFS=$'\t' read -r cmd _; do
        [[ -e $dest/usr/share/man/man1/nook-$cmd.1 ]] || man_missing+=" nook-$cmd.1"
done < <(LD_LIBRARY_PATH=$dest/usr/lib/$multiarch "$dest/usr/bin/nook" __doc)
[[ -z $man_missing ]] && ok "a man page for every command nook __doc lists" ||
        not_ok "a man page for every command nook __doc lists" "missing:$man_missing (man/meson.build reads the commands from src/cli/main.c)"
if grep -q -- '\\-\\-image' "$dest/usr/share/man/man1/nook-run.1" 2>/dev/null; then
        ok "nook-run(1) documents --image (from nook run --help)"
else
        not_ok "nook-run(1) documents --image (from nook run --help)"
fi
cat >"$tmp/v.c" <<'C'
#include <stdio.h>
#include <nook.h>
int main(void) { puts(nook_version()); return 0; }
C
if PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=$dest/usr/lib/$multiarch/pkgconfig \
        sh -c 'cc -o "$1/v" "$1/v.c" $(pkg-config --cflags --libs nook)' sh "$tmp" >"$tmp/cc.log" 2>&1 &&
        [[ $(LD_LIBRARY_PATH=$dest/usr/lib/$multiarch "$tmp/v") == "$meson_version" ]]; then
        ok "a program built with pkg-config nook links libnook and gets its version"
else
        not_ok "a program built with pkg-config nook links libnook and gets its version" "$(cat "$tmp/cc.log")"
fi

# ---- 2. install and use --------------------------------------------------------------------
installed=1
if DEBIAN_FRONTEND=noninteractive timeout 180 apt-get install -y "$deb" >"$tmp/apt.log" 2>&1; then
        ok "apt-get install ./$(basename "$deb")"
else
        not_ok "apt-get install ./$(basename "$deb")" "$(tail -10 "$tmp/apt.log")"
        finish
fi
out=$(cd / && timeout 60 nook run -- echo hi 2>&1)
[[ $out == hi ]] && ok "nook run -- echo hi (the installed nook, as root)" ||
        not_ok "nook run -- echo hi (the installed nook, as root)" "$out"
check "nook doctor exits 0" timeout 60 nook doctor
check "nook create debtest (state in /var/lib/nook)" timeout 60 nook create debtest
sup_pid=$(pgrep -f -- "--state /var/lib/nook/sandboxes/debtest " | head -1)
sup_exe=$([[ -n $sup_pid ]] && readlink "/proc/$sup_pid/exe")
[[ $sup_exe == /usr/libexec/nook-supervisor ]] && ok "its supervisor is /usr/libexec/nook-supervisor" ||
        not_ok "its supervisor is /usr/libexec/nook-supervisor" "found '$sup_exe'"
[[ $(man -w nook 2>&1) == /usr/share/man/man1/nook.1* ]] && ok "man -w nook" || not_ok "man -w nook" "$(man -w nook 2>&1)"
check "man -w nook-image" man -w nook-image

# rootless, from the package: newuidmap (uidmap) and the user's own state folder
test_user=${NOOK_TEST_USER:-nook-test}
if id -u "$test_user" >/dev/null 2>&1; then
        uhome=$(mktemp -d /var/tmp/nook-deb-user.XXXXXX)
        chown "$test_user:" "$uhome"
        out=$(cd / && setpriv --reuid="$test_user" --regid="$test_user" --init-groups --inh-caps=-all -- \
                env -i PATH="$PATH" HOME="$uhome" NOOK_HOME="$uhome/nook" timeout 60 nook run -- echo hi 2>&1)
        [[ $out == hi ]] && ok "as $test_user: nook run -- echo hi (rootless)" || not_ok "as $test_user: nook run -- echo hi (rootless)" "$out"
        rt=$(readlink "$uhome/nook/run") && [[ $rt == /*/nook*/* ]] && rm -rf "$rt" # its runtime folder
        rm -rf "$uhome"
else
        echo "ok - as an unprivileged user # SKIP no user $test_user (scripts/test creates it in its user stage)"
        n_skip=$((n_skip + 1))
fi

# bash completion: the installed file, as bash-completion would load it
complete_words() { # complete_words WORD...: COMPREPLY for the last word, one a line
        bash -c 'source /usr/share/bash-completion/completions/nook
                COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _nook; printf "%s\n" "${COMPREPLY[@]}"' nook "$@"
}
out=$(complete_words nook "")
grep -qx run <<<"$out" && grep -qx snapshot <<<"$out" && ! grep -q __complete <<<"$out" &&
        ok "bash: nook <TAB> lists the commands" || not_ok "bash: nook <TAB> lists the commands" "$out"
out=$(complete_words nook run --ima)
[[ $out == --image ]] && ok "bash: nook run --ima<TAB> gives --image" || not_ok "bash: nook run --ima<TAB> gives --image" "$out"
out=$(complete_words nook exec deb)
[[ $out == debtest ]] && ok "bash: nook exec deb<TAB> gives the sandbox's name" ||
        not_ok "bash: nook exec deb<TAB> gives the sandbox's name" "$out"
out=$(complete_words nook image "")
grep -qx pull <<<"$out" && ok "bash: nook image <TAB> lists its subcommands" || not_ok "bash: nook image <TAB> lists its subcommands" "$out"

# another root state folder's sandbox, claimed in the host-wide /var/lib/nook-idclaims: purge
# must keep that claim (deleting the file would hand its range to the next new sandbox)
h2="$tmp/home2"
mkdir -m 0700 "$h2"
check "a sandbox in another root state folder (--home)" timeout 60 nook --home "$h2" create debother
check "stop it (a stopped sandbox keeps its range)" timeout 60 nook --home "$h2" stop debother

# ---- 3. remove, purge ----------------------------------------------------------------------
dpkg -L nook | sort >"$tmp/files"
if DEBIAN_FRONTEND=noninteractive timeout 120 apt-get remove -y nook >"$tmp/remove.log" 2>&1; then
        ok "apt-get remove nook"
else
        not_ok "apt-get remove nook" "$(tail -10 "$tmp/remove.log")"
fi
left=""
while IFS= read -r f; do
        [[ -e $f && ! -d $f ]] && left+=" $f"
done <"$tmp/files"
[[ -z $left ]] && ok "remove: every file of dpkg -L nook is gone" || not_ok "remove: every file of dpkg -L nook is gone" "left:$left"
if pgrep -f -- "--state /var/lib/nook/sandboxes/debtest " >/dev/null; then
        not_ok "remove: prerm stopped the sandbox's supervisor" "$(pgrep -af -- "--state /var/lib/nook/")"
else
        ok "remove: prerm stopped the sandbox's supervisor"
fi
[[ -d /var/lib/nook/workspaces ]] && ok "remove keeps /var/lib/nook" || not_ok "remove keeps /var/lib/nook"
rt=$(readlink /var/lib/nook/run)
if DEBIAN_FRONTEND=noninteractive timeout 120 apt-get purge -y nook >"$tmp/purge.log" 2>&1; then
        installed=0
        ok "apt-get purge nook"
else
        not_ok "apt-get purge nook" "$(tail -10 "$tmp/purge.log")"
fi
[[ ! -e /var/lib/nook ]] && ok "purge removes /var/lib/nook" || not_ok "purge removes /var/lib/nook" "$(ls -la /var/lib/nook)"
grep -qaF "$h2" /var/lib/nook-idclaims 2>/dev/null && ok "purge keeps the id claims another state folder holds" ||
        not_ok "purge keeps the id claims another state folder holds" "$(ls -la /var/lib/nook-idclaims 2>&1)"
h2rt=$(readlink "$h2/run")
[[ $h2rt == /*/nook*/* ]] && rm -rf "$h2rt" # its runtime folder; the claim is stale once $h2 is gone
rm -rf "$h2"
# (no link: /var/lib/nook/run was a plain folder, no tmpfs was usable, and went with it)
[[ -z $rt || ! -e $rt ]] && ok "purge removes the runtime folder /var/lib/nook/run linked to ($rt)" ||
        not_ok "purge removes the runtime folder /var/lib/nook/run linked to" "link '$rt': $(ls -la "$rt" 2>&1)"
if dpkg-query -W nook >/dev/null 2>&1; then
        not_ok "purge: dpkg knows nothing of nook" "$(dpkg-query -W -f '${Status}' nook)"
else
        ok "purge: dpkg knows nothing of nook"
fi
left=""
for d in /usr/share/doc/nook /usr/lib/"$multiarch"/libnook.so.0 /usr/libexec/nook-supervisor /usr/bin/nook-oci; do
        [[ -e $d ]] && left+=" $d"
done
[[ -z $left ]] && ok "purge: nothing of the package is left" || not_ok "purge: nothing of the package is left" "left:$left"
finish
