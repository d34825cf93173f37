#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Compares two runs of tests/oci/validation.sh (issue 16): the reference runtime (runc) and
# nook-oci, against the committed list of nook-oci's known failures.
#
#   tests/oci/compare.sh [--skeleton] REFERENCE_RESULTS NOOK_RESULTS [KNOWN_FAILURES]
#
# *_RESULTS are the files `validation.sh --results FILE` writes. KNOWN_FAILURES defaults to
# tests/oci/known-failures.txt: one line per check, "NAME — REASON" (an em dash, or " -- "),
# NAME exactly as validation.sh prints it ("PROGRAM: DESCRIPTION") or a shell pattern
# ("linux_cgroups_hugetlb: *"); blank lines and lines starting with # are ignored.
#
# A regression is a check the reference runtime passes and nook-oci does not, which no line of
# KNOWN_FAILURES names. Checks are counted per name (several checks of a program share a name,
# and their order varies between runs). Checks the reference fails do not count either way, nor
# any check of a program the reference failed as a whole (it exited non-zero, timed out, or its
# lifecycle check failed): such a program is no baseline.
# Entries that match nothing nook-oci failed are reported as stale (not an error): remove them.
#
# --skeleton prints a KNOWN_FAILURES file listing every current regression with the reason
# "REASON?" (to fill in by hand), instead of comparing.
#
# Prints the regressions, a summary, and last "1 passed, 0 failed" when there is none, or
# "0 passed, N failed" for N regressions. Exit status: 0 without regressions, 1 with, 2 on a
# usage error or a malformed KNOWN_FAILURES line.
set -uo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
skeleton=0
if [[ "${1:-}" == --skeleton ]]; then
        skeleton=1
        shift
fi
if (($# < 2 || $# > 3)); then
        sed -n '/^#   tests\/oci/,/^# usage error/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 2
fi
ref=$1
nook=$2
known=${3:-$src/tests/oci/known-failures.txt}
for f in "$ref" "$nook"; do
        [[ -f "$f" && -r "$f" ]] || { echo "compare.sh: cannot read results file '$f'" >&2; exit 2; }
done
if [[ ! -r "$known" ]]; then
        ((skeleton)) || { echo "compare.sh: no known-failures file '$known'" >&2; exit 2; }
        known=/dev/null
fi

exec python3 - "$ref" "$nook" "$known" "$skeleton" <<'EOF'
import fnmatch, re, sys
from collections import Counter

ref_path, nook_path, known_path, skeleton = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
line_re = re.compile(r"^(ok|not ok) - (.*?)( # (TODO|SKIP))?$")

# A program that failed as a whole: "PROG (exited 1)", "PROG (timed out ...)", "PROG: lifecycle".
whole_re = re.compile(r"^([a-z0-9_]+)( \(.*\)|: lifecycle)$")

def passes(path):
    """Counts the passed checks per name (pending ones do not count), and the programs that
    failed as a whole."""
    c = Counter()
    failed_programs = {}
    seen = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = line_re.match(line.rstrip("\n"))
            if not m:
                continue
            seen += 1
            if m.group(1) == "ok" and not m.group(3):
                c[m.group(2)] += 1
            elif m.group(1) == "not ok":
                w = whole_re.match(m.group(2))
                if w:
                    failed_programs[w.group(1)] = m.group(2)
    if seen == 0:
        print(f"compare.sh: '{path}' has no check lines: not a validation.sh --results file", file=sys.stderr)
        sys.exit(2)
    return c, failed_programs

def read_known(path):
    entries = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            for sep in (" — ", " -- "):
                if sep in line:
                    name, reason = line.split(sep, 1)
                    break
            else:
                name, reason = line, ""
            if not name.strip() or not reason.strip():
                print(f"compare.sh: {path}:{n}: want 'NAME — REASON', got '{line}'", file=sys.stderr)
                sys.exit(2)
            entries.append((name.strip(), reason.strip()))
    return entries

ref, ref_failed = passes(ref_path)
nook, _ = passes(nook_path)
# A program the reference failed as a whole is no baseline: the checks it passed on the way (a
# *_fail program whose bad config runc accepted runs a whole container) say nothing.
for name in list(ref):
    if name.split(": ", 1)[0] in ref_failed:
        del ref[name]
known = read_known(known_path)

missing = {}      # name -> how many of the reference's passes nook-oci lacks
for name, n in ref.items():
    lack = n - nook.get(name, 0)
    if lack > 0:
        missing[name] = lack

if skeleton:
    print("# nook-oci's known failures of the runtime-tools validation suite: checks runc passes")
    print("# here and nook-oci does not. One line per check: NAME — REASON (tests/oci/compare.sh).")
    for name in sorted(missing):
        print(f"{name} — REASON?")
    sys.exit(0)

used = set()
regressions = []
listed = 0
for name in sorted(missing):
    hit = next((pat for pat, _ in known if pat == name or fnmatch.fnmatchcase(name, pat)), None)
    if hit is None:
        regressions.append(name)
    else:
        used.add(hit)
        listed += missing[name]

ref_total = sum(ref.values())
kept = ref_total - sum(missing.values())
for name in regressions:
    print(f"not ok - regression: {name} (runc passed it {ref[name]}x, nook-oci {nook.get(name, 0)}x)")
for pat, reason in known:
    if pat not in used:
        print(f"# stale known failure (nook-oci passes it now, or runc failed it this run): {pat}")
print(f"# runc passed {ref_total} checks; nook-oci passed {kept} of them; "
      f"{listed} more are known failures (tests/oci/known-failures.txt); "
      f"{sum(missing[n] for n in regressions)} regressed in {len(regressions)} names")
print(f"# nook-oci passed {sum(nook.values())} checks in all")
if ref_failed:
    print("# not compared (the reference failed them as a whole): " + ", ".join(sorted(ref_failed.values())))
if regressions:
    print(f"0 passed, {len(regressions)} failed")
    sys.exit(1)
print("1 passed, 0 failed")
EOF
