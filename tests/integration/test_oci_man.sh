#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook-oci(1) (man/nook-oci.1.in, written by hand) against the real binary: every command of
# `nook-oci --help` has its section, every flag a --help text lists is documented, the page
# renders without a groff warning, and the io.nook.* annotations that `nook-oci features` reports
# are those the man page and docs/kubernetes.md describe.  Also exec's --preserve-fds, which the
# page documents: a bad value is refused naming the flag; and `create` by anyone but host root
# (another user, root of `unshare -r`) refused up front, saying rootless is not implemented.
# No container is made: every stage.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/oci_lib.sh"

require_bin "$NOOK_OCI"
plan 11

src=$(cd "$(dirname "$0")/../.." && pwd)
page="$NOOK_BUILD_DIR/man/nook-oci.1"
# the page as text: roff's escaped minus signs as plain ones
text=$(sed 's/\\-/-/g' "$page" 2>/dev/null)

[[ -s $page ]] && ok "the build made man/nook-oci.1" || not_ok "the build made man/nook-oci.1" "missing: $page"
version=$("$NOOK_OCI" --version | sed -n 's/^nook-oci version //p')
like "$(sed -n '/^\.TH/p' "$page")" "\"nook $version\"" "the page's header carries the built version ($version)"

if command -v groff >/dev/null; then
        warnings=$(groff -man -ww -z "$page" 2>&1)
        is "$warnings" "" "groff renders the page without a warning"
else
        skip "groff is missing (man-db's groff-base installs it)"
fi

help=$("$NOOK_OCI" --help)
commands=$(awk '/^Commands:/{on=1; next} on && /^$/{exit} on{print $1}' <<<"$help")
missing=""
for c in $commands; do
        grep -q "^\.SS nook-oci $c\b" <<<"$text" || missing+=" $c"
done
[[ -n $commands && -z $missing ]] && ok "a section for each of the $(wc -w <<<"$commands") commands of nook-oci --help" ||
        not_ok "a section for each command of nook-oci --help" "commands: $commands" "missing:$missing"

# every --flag of the global help and of each command's --help
flags=$(grep -oE -- '--[a-z][a-z-]*' <<<"$help")
for c in $commands; do
        # no --root: a command's --help needs none (any user, XDG_RUNTIME_DIR or not)
        flags+=$'\n'$(env -u XDG_RUNTIME_DIR "$NOOK_OCI" "$c" --help | grep -oE -- '--[a-z][a-z-]*')
done
missing=""
for f in $(sort -u <<<"$flags"); do
        grep -q -- "$f\b" <<<"$text" || missing+=" $f"
done
[[ $(wc -w <<<"$flags") -gt 20 && -z $missing ]] && ok "every flag the --help texts list is in the page ($(sort -u <<<"$flags" | wc -l))" ||
        not_ok "every flag the --help texts list is in the page" "missing:$missing"

# the annotations: what the binary reports = what the page and docs/kubernetes.md describe
features=$("$NOOK_OCI" features | jq -r '.annotations | keys[] | select(startswith("io.nook."))' | sort)
page_ann=$(grep -oE '^\.B io\.nook\.[a-z]+' <<<"$text" | sed 's/^\.B //' | sort -u)
doc_ann=$(grep -oE '^\| `io\.nook\.[a-z]+`' "$src/docs/kubernetes.md" | tr -d '|` ' | sort -u)
is "$doc_ann" "$features" "docs/kubernetes.md's annotation table lists exactly what nook-oci features reports"
# the page also names io.nook.domains, which create refuses with a reason
is "$(grep -vx io.nook.domains <<<"$page_ann")" "$features" "the page's ANNOTATIONS list what nook-oci features reports (+ the refused io.nook.domains)"

oci exec --preserve-fds lots some-id
like "$status:$err" "^1:.*--preserve-fds 'lots' is not a number" "exec --preserve-fds with a bad value: refused, naming it"
oci exec --preserve-fds 2 no-such-container true
like "$status:$err" "^1:.*no-such-container" "exec --preserve-fds 2 is accepted (the error is the missing container)"

# rootless create: this stage if it is not host root, else the same binary under `unshare -r`
mkdir -p "$NOOK_HOME/rl"
"$NOOK_OCI" spec --bundle "$NOOK_HOME/rl"
if [[ -z $(oci_stage_reason) ]]; then
        if unshare -r true 2>/dev/null; then
                err=$(unshare -r "$NOOK_OCI" --root "$OCI_ROOT" create --bundle "$NOOK_HOME/rl" rl1 2>&1 </dev/null)
                status=$?
        else
                err="" status=skip
        fi
else
        oci create --bundle "$NOOK_HOME/rl" rl1
fi
if [[ $status == skip ]]; then
        skip "unshare -r does not work here"
        skip "unshare -r does not work here"
else
        like "$status:$err" "^1:nook-oci: nook-oci is not running as host root \\(uid [0-9]+.*rootless nook-oci is not implemented.*start the engine as root" \
                "create as other than host root: refused, saying rootless is not implemented and what to do"
        is "$(ls -A "$OCI_ROOT" 2>/dev/null)" "" "...and nothing is left in --root"
fi
