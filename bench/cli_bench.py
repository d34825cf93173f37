#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Whole processes, side by side (bench/README.md, section cli-bench).

Each row is one command started with posix_spawn and reaped with wait4: wall time (until that
process exits), CPU time and minor page faults.  The bench is a child subreaper
(PR_SET_CHILD_SUBREAPER), so a descendant whose parent exits without waiting for it is reparented
to the bench and reaped here: CPU and faults are those of the whole process tree.  (bwrap's
outer process exits on an eventfd from the sandbox's pid 1 without waiting for it, so a plain
wait4 sees only bwrap's exec and clone, not the namespaces' setup nor the command: 2.3 of 5.8 ms
on 2026-12-04.)  The "chain CPU" column is what the command's own wait4 reports, the figure
rows before 2026-12-04 08:00 UTC used.  The rows run interleaved, rotating the order each round,
so the machine's load hits all alike.  Numbers are printed, never asserted.

    bench/cli_bench.py BUILD_DIR [--rounds N] [--slow-rounds N] [--old OLD_BUILD_DIR] [--no-peers]

--old adds the `nook run` rows of another build (a copy of the build before a change), in the
same rounds and with a NOOK_HOME of their own: old and new measured interleaved.  --no-peers
leaves out podman, crun and podman through nook-oci (slow rows).

Peers, each skipped with a message when it is missing or cannot run here:
    bwrap           the brief's args (as bench-sandbox), and --ro-bind ROOTFS /
    podman          --runtime runc run --rm --rootfs ROOTFS true (cgroupfs, nofile/nproc ulimits)
    crun            crun run on an OCI bundle of ROOTFS
    podman+nook-oci podman --runtime BUILD/src/oci/nook-oci, when that program is built
"""
import argparse
import ctypes
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run_once(argv, env):
    """argv's wall, CPU and minor faults of its whole process tree, and its own wait4's CPU; None
    if it failed.  Descendants left behind are reaped here (the bench is a subreaper); one still
    alive 5 s after argv exited is counted as a failure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=[
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    deadline = time.monotonic() + 5
    while True:
        try:
            left, _, _ = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if left == 0:
            if time.monotonic() > deadline:
                print(f"  {argv[0]}: a descendant outlived it by 5 s", file=sys.stderr)
                return None
            time.sleep(0.0002)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if os.waitstatus_to_exitcode(status) != 0:
        return None
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall * 1e3, cpu * 1e3, after.ru_minflt - before.ru_minflt, (ru.ru_utime + ru.ru_stime) * 1e3


def works(argv, env):
    r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return r.returncode == 0, (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]


def libs_of(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        for p in parts:
            if p.startswith("/"):
                libs.append(p)
    return libs


def make_rootfs(root):
    """/usr/bin/true with its libraries, /bin -> usr/bin: the plain rootfs bench-sandbox uses."""
    for d in ("usr/bin", "proc", "dev", "sys", "tmp", "etc", "workspace"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.symlink("usr/bin", os.path.join(root, "bin"))
    true = os.path.realpath("/usr/bin/true")
    shutil.copy2(true, os.path.join(root, "usr/bin/true"))
    for lib in libs_of(true):
        dest = os.path.join(root, lib.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(os.path.realpath(lib), dest)


def make_bundle(bundle, rootfs_src):
    shutil.copytree(rootfs_src, os.path.join(bundle, "rootfs"), symlinks=True)
    r = subprocess.run(["crun", "spec"], cwd=bundle, capture_output=True, text=True)
    if r.returncode != 0:
        return False
    import json
    path = os.path.join(bundle, "config.json")
    with open(path) as f:
        spec = json.load(f)
    spec["process"]["args"] = ["/usr/bin/true"]
    spec["process"]["terminal"] = False
    spec["root"] = {"path": "rootfs", "readonly": True}
    with open(path, "w") as f:
        json.dump(spec, f)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--slow-rounds", type=int, default=8, help="rounds of the podman/crun rows")
    ap.add_argument("--old", help="a build directory whose nook run rows run beside this one's")
    ap.add_argument("--no-peers", action="store_true", help="no podman, crun, podman+nook-oci rows")
    a = ap.parse_args()
    PR_SET_CHILD_SUBREAPER = 36
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("cli-bench: prctl(PR_SET_CHILD_SUBREAPER) failed: CPU would miss orphaned descendants",
              file=sys.stderr)
        return 1
    build = os.path.abspath(a.build)
    nook = os.path.join(build, "src/cli/nook")
    tmp = tempfile.mkdtemp(prefix="nook-cli-bench.", dir="/var/tmp")
    home = os.path.join(tmp, "home")
    os.mkdir(home, 0o700)
    env = dict(os.environ, NOOK_HOME=home)
    env.pop("NOOK_SUPERVISOR", None)
    rootfs = os.path.join(tmp, "rootfs")
    make_rootfs(rootfs)
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws)
    bwrap = shutil.which("bwrap")
    rows = [("host posix_spawn /bin/true", ["/bin/true"], False),
            ("nook --version", [nook, "--version"], False),
            ("nook ls", [nook, "ls"], False),
            ("nook run -- true (host image)", [nook, "run", "--", "true"], False),
            ("nook run --image ROOTFS -- true", [nook, "run", "--image", rootfs, "--", "/usr/bin/true"], False)]
    row_env = {}
    if a.old:
        old_nook = os.path.join(os.path.abspath(a.old), "src/cli/nook")
        old_home = os.path.join(tmp, "home-old")
        os.mkdir(old_home, 0o700)
        row_env["OLD nook run -- true (host image)"] = dict(env, NOOK_HOME=old_home)
        row_env["OLD nook run --image ROOTFS -- true"] = dict(env, NOOK_HOME=old_home)
        rows.append(("OLD nook run -- true (host image)", [old_nook, "run", "--", "true"], False))
        rows.append(("OLD nook run --image ROOTFS -- true",
                     [old_nook, "run", "--image", rootfs, "--", "/usr/bin/true"], False))
    if bwrap:
        rows.append(("bwrap (brief args) true", [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                     "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                     "--proc", "/proc", "--dev", "/dev", "--bind", ws, "/workspace", "true"], False))
        rows.append(("bwrap --ro-bind ROOTFS / true", [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", rootfs, "/",
                     "--proc", "/proc", "--dev", "/dev", "/usr/bin/true"], False))
    else:
        print("  skipped bwrap: not installed (apt-get install -y bubblewrap)")
    podman = None if a.no_peers else shutil.which("podman")
    pod_base = None
    if podman:
        pod_base = [podman, "--cgroup-manager", "cgroupfs", "--runtime", "runc", "run", "--rm",
                    "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", "--network", "none"]
        prootfs = os.path.join(tmp, "podman-rootfs")
        shutil.copytree(rootfs, prootfs, symlinks=True)
        argv = pod_base + ["--rootfs", prootfs, "/usr/bin/true"]
        ok, why = works(argv, env)
        if ok:
            rows.append(("podman --runtime runc run --rm --rootfs", argv, True))
        else:
            print(f"  skipped podman: a trial run failed: {why[0][:160]}")
    else:
        print("  skipped podman: " + ("--no-peers" if a.no_peers else "not installed"))
    crun = None if a.no_peers else shutil.which("crun")
    if crun:
        bundle = os.path.join(tmp, "bundle")
        os.mkdir(bundle)
        if make_bundle(bundle, rootfs):
            cid = [0]

            def crun_argv():
                cid[0] += 1
                return [crun, "run", "-b", bundle, f"nook-bench-{os.getpid()}-{cid[0]}"]
            ok, why = works(crun_argv(), env)
            if ok:
                rows.append(("crun run (OCI bundle of ROOTFS)", crun_argv, True))
            else:
                print(f"  skipped crun: a trial run failed here: {why[0][:160]}")
        else:
            print("  skipped crun: crun spec failed")
    else:
        print("  skipped crun: " + ("--no-peers" if a.no_peers else "not installed"))
    oci = os.path.join(build, "src/oci/nook-oci")
    if not os.access(oci, os.X_OK):
        for alt in ("build", "build-test"):
            p = os.path.join(os.path.dirname(build), alt, "src/oci/nook-oci")
            if os.access(p, os.X_OK):
                oci = p
                break
    if podman and pod_base and os.access(oci, os.X_OK):
        orootfs = os.path.join(tmp, "oci-rootfs")
        shutil.copytree(rootfs, orootfs, symlinks=True)
        argv = pod_base[:]
        argv[argv.index("runc")] = oci
        argv += ["--rootfs", orootfs, "/usr/bin/true"]
        ok, why = works(argv, env)
        if ok:
            rows.append(("podman --runtime nook-oci run --rm --rootfs", argv, True))
        else:
            print(f"  skipped podman through nook-oci: a trial run failed: {why[0][:160]}")
    else:
        print("  skipped podman through nook-oci: " +
              ("--no-peers" if a.no_peers else "nook-oci is not built (src/oci/nook-oci)"))

    res = {name: [] for name, _, _ in rows}
    by_round = {name: {} for name, _, _ in rows}  # round -> sample, for the same-round ratios
    fails = {name: 0 for name, _, _ in rows}
    for r in range(a.rounds):
        order = rows[r % len(rows):] + rows[:r % len(rows)]
        for name, argv, slow in order:
            if slow and r >= a.slow_rounds:
                continue
            v = run_once(argv() if callable(argv) else argv, row_env.get(name, env))
            if v is None:
                fails[name] += 1
            else:
                res[name].append(v)
                by_round[name][r] = v
    print(f"  {'what (median of N)':46} {'N':>3} {'wall ms':>9} {'CPU ms':>8} {'minflt':>7} {'chain CPU':>9}")
    med = {}
    for name, _, _ in rows:
        v = res[name]
        if not v:
            print(f"  {name:46} all {fails[name]} runs failed")
            continue
        m = tuple(statistics.median(x[i] for x in v) for i in range(4))
        med[name] = m
        extra = f"  ({fails[name]} failed)" if fails[name] else ""
        print(f"  {name:46} {len(v):3d} {m[0]:9.2f} {m[1]:8.2f} {m[2]:7.0f} {m[3]:9.2f}{extra}")

    def ratio(a_, b_, what, budget=""):
        if a_ in med and b_ in med:
            w = med[a_][0] / med[b_][0]
            c = med[a_][1] / med[b_][1] if med[b_][1] > 0 else float("nan")
            print(f"  {what:60} wall {w:5.2f}x  CPU {c:5.2f}x  {budget}")
    def paired(a_, b_, what, budgets=None):
        """Median of the same-round ratios a_/b_ (wall, CPU) with a 90 % bootstrap interval of
        that median (2000 resamples, fixed seed): a VM whose speed drifts between rounds moves
        both sides of a pair alike.  budgets: (wall, CPU) for a verdict."""
        if a_ not in by_round or b_ not in by_round:
            return
        rounds = sorted(set(by_round[a_]) & set(by_round[b_]))
        if not rounds:
            return
        rng = random.Random(17)
        parts = []
        for i, label in ((0, "wall"), (1, "CPU")):
            rs = [by_round[a_][r][i] / by_round[b_][r][i] for r in rounds if by_round[b_][r][i] > 0]
            if not rs:
                continue
            meds = sorted(statistics.median(rng.choices(rs, k=len(rs))) for _ in range(2000))
            lo, hi, m = meds[100], meds[1899], statistics.median(rs)
            verdict = ""
            if budgets:
                b = budgets[i]
                verdict = (" within" if hi <= b else " OVER" if lo > b else " at the line") + f" (<= {b:g}x)"
            parts.append(f"{label} {m:4.2f}x [{lo:4.2f}-{hi:4.2f}]{verdict}")
        print(f"  {what:46} {len(rounds):3d} pairs: " + ", ".join(parts))

    print()
    ratio("nook run -- true (host image)", "bwrap (brief args) true", "nook run / bwrap (host image)",
          "budget <= 2x wall, <= 3x CPU")
    ratio("nook run --image ROOTFS -- true", "bwrap --ro-bind ROOTFS / true", "nook run / bwrap (rootfs dir)")
    ratio("OLD nook run -- true (host image)", "bwrap (brief args) true", "OLD nook run / bwrap (host image)")
    ratio("OLD nook run --image ROOTFS -- true", "bwrap --ro-bind ROOTFS / true", "OLD nook run / bwrap (rootfs dir)")
    ratio("nook run -- true (host image)", "OLD nook run -- true (host image)", "nook run: new / OLD (host image)")
    ratio("nook run --image ROOTFS -- true", "OLD nook run --image ROOTFS -- true", "nook run: new / OLD (rootfs dir)")
    ratio("nook run -- true (host image)", "podman --runtime runc run --rm --rootfs", "nook run / podman+runc")
    ratio("nook run -- true (host image)", "crun run (OCI bundle of ROOTFS)", "nook run / crun run")
    ratio("podman --runtime nook-oci run --rm --rootfs", "podman --runtime runc run --rm --rootfs",
          "podman: nook-oci / runc")
    print("\n  same-round ratios: median, [90 % interval of the median]")
    paired("nook run -- true (host image)", "bwrap (brief args) true", "nook run / bwrap (host image)", (2, 3))
    paired("nook run --image ROOTFS -- true", "bwrap --ro-bind ROOTFS / true", "nook run / bwrap (rootfs dir)")
    paired("nook run -- true (host image)", "OLD nook run -- true (host image)", "nook run: new / OLD (host image)")
    paired("nook run --image ROOTFS -- true", "OLD nook run --image ROOTFS -- true", "nook run: new / OLD (rootfs dir)")
    for h in (home, os.path.join(tmp, "home-old")):
        # the runtime folder on a tmpfs that NOOK_HOME/run links to (none with --old's old build)
        if os.path.islink(os.path.join(h, "run")):
            shutil.rmtree(os.readlink(os.path.join(h, "run")), ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
