#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Generates nook's man pages from the built `nook` binary's own --help text.

    gen_man.py NOOK OUTDIR VERSION PAGE...

The --help text of each command (src/cli/cmd_*.c) is the one source of its synopsis, description
and options; `nook __doc` (src/cli/cmd_complete.c) lists the commands, their summaries and
subcommands.  The shell completions read the same --help text (nook __complete), so a flag that
--help documents is completed and in the man page, and one it does not document is in neither.

PAGE is "nook" or "nook-COMMAND": man/meson.build lists one per `{ "name", cmd_... }` entry of
the command table in src/cli/main.c.  A command without a page (an entry of another shape) is
named on stderr and still listed in nook(1); tests/integration/test_completion.sh fails on it.
"""
import os
import re
import subprocess
import sys
import time

# dpkg-buildpackage sets SOURCE_DATE_EPOCH (the changelog's date): reproducible pages
_epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
DATE = time.strftime("%Y-%m-%d", time.gmtime(int(_epoch))) if _epoch.isdigit() else ""


def run(nook, *args):
    # help never opens the store; an ASan build's leak report at exit is not the page's business
    env = dict(os.environ, NOOK_HOME="/nonexistent/nook-man",
               ASAN_OPTIONS=(os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":"))
    p = subprocess.run([nook, *args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"gen_man.py: '{' '.join(['nook', *args])}' exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def esc(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + s if s.startswith((".", "'")) else s


def render_help(text, skip_usage=False):
    """roff for one --help text: usage as a literal block, prose as paragraphs, two-column
    lines ("  SPEC  description") as tagged paragraphs, other indented lines as literal."""
    out = []
    in_literal = False

    def literal(on):
        nonlocal in_literal
        if on != in_literal:
            out.append(".nf" if on else ".fi")
            in_literal = on

    lines = text.rstrip("\n").split("\n")
    item_col = None
    for raw in lines:
        line = raw.rstrip()
        if skip_usage and (line.startswith("Usage:") or re.match(r"^ {7}nook ", line)):
            continue
        if not line:
            literal(False)
            out.append(".PP")
            item_col = None
            continue
        m = re.match(r"^( {1,6})(\S.*?\S)( {2,})(\S.*)$", line)
        if m and not line.lstrip().startswith("nook "):
            literal(False)
            out.append(".TP")
            out.append(".B " + esc(m.group(2)))
            out.append(esc(m.group(4)))
            item_col = len(m.group(1)) + len(m.group(2)) + len(m.group(3))
            continue
        if item_col is not None and raw.startswith(" " * min(item_col, 8)) and not in_literal:
            out.append(esc(line.strip()))  # a description's continuation line
            continue
        if line.startswith(" "):
            literal(True)
            out.append(esc(line.strip()))
            continue
        literal(False)
        item_col = None
        if line.startswith("Usage:"):
            line = line[len("Usage:"):].strip()
        out.append(esc(line))
    literal(False)
    return "\n".join(out) + "\n"


def usage_lines(text):
    res = []
    for line in text.split("\n"):
        if line.startswith("Usage:"):
            res.append(line[len("Usage:"):].strip())
        elif res and re.match(r"^ {7}nook ", line):
            res.append(line.strip())
    return res


def header(name, summary, version):
    return (f'.TH "{name.upper()}" "1" "{DATE}" "nook {version}" "nook manual"\n'
            f".SH NAME\n{esc(name)} \\- {esc(summary)}\n")


def synopsis(usages):
    return ".SH SYNOPSIS\n.nf\n" + "\n".join(esc(u) for u in usages) + "\n.fi\n"


def command_page(nook, cmd, summary, subs, subs_help, version):
    text = run(nook, cmd, "--help")
    page = header(f"nook-{cmd}", summary, version)
    page += synopsis(usage_lines(text) or [f"nook {cmd}"])
    page += ".SH DESCRIPTION\n" + render_help(text, skip_usage=True)
    if subs and subs_help:
        page += ".SH COMMANDS\n"
        for sub in subs:
            st = run(nook, cmd, sub, "--help")
            page += f".SS {esc('nook ' + cmd + ' ' + sub)}\n" + synopsis(usage_lines(st)).replace(".SH SYNOPSIS\n", "")
            page += render_help(st, skip_usage=True)
    page += ".SH SEE ALSO\n.BR nook (1)\n"
    return page


FILES = """.SH ENVIRONMENT
.TP
.B NOOK_HOME
The state folder (the same as \\-\\-home).
.TP
.B NOOK_SUPERVISOR
The nook\\-supervisor binary to start; by default the one installed with libnook
(LIBEXECDIR/nook\\-supervisor), or the build tree's when nook runs from its build directory.
.TP
.B NOOK_IMAGE_MODULE
libnook's image module (pulls, image archives, snapshots, hashing) to load; by default the one
installed with libnook (LIBDIR/nook/libnook\\-image.so), or the build tree's.
.TP
.B NOOK_RUNTIME_DIR
Where a state folder that has no runtime folder yet gets one: nook makes
\\fBNOOK_RUNTIME_DIR/nook\\-UID/KEY\\fR (0700) and links \\fBNOOK_HOME/run\\fR to it.  The runtime
folder holds what needs no durability: each sandbox's control socket and supervisor log
(\\fBnook logs \\-\\-system\\fR).  By default \\fB/run/nook\\fR (root, when /run is a tmpfs),
\\fB$XDG_RUNTIME_DIR/nook\\fR or \\fB/run/user/UID/nook\\fR (other users), else
\\fB/dev/shm/nook\\-UID\\fR; without a usable tmpfs, \\fBNOOK_HOME/run\\fR is a plain folder.
Once the link exists every caller follows it, whatever its own variables.
.TP
.B NOOK_CRIU
The criu binary \\fBnook checkpoint\\fR and \\fBnook doctor\\fR probe; by default criu in
/usr/local/sbin, /usr/sbin, /sbin, /usr/local/bin or /usr/bin.
.SH FILES
.TP
.B /var/lib/nook
The state folder of root: the database, images, sandboxes, workspaces, snapshots and volumes.
Removed by \\fBapt purge nook\\fR, with everything in it.
.TP
.B ~/.local/share/nook
The state folder of any other user (\\fB$XDG_DATA_HOME/nook\\fR when that is set); no package
removes it.
.TP
.B NOOK_HOME/run
A link to the state folder's runtime folder on a tmpfs (see NOOK_RUNTIME_DIR): emptied at
reboot, after which the sandboxes that ran are stopped ones and start again; their supervisor
logs went with it.
.TP
.B LIBEXECDIR/nook\\-supervisor
The per\\-sandbox supervisor that libnook starts; never run by hand.
.SH EXIT STATUS
0 on success, 1 for an error (the message says what failed, on which input, and what to do),
2 for bad usage.
.B exec
and
.B run
return the command's own status (128+N when it was killed by signal N), 124 when it timed
out and 125 when nook itself failed.
"""


def main_page(nook, docs, pages, version, libexecdir, libdir):
    text = run(nook, "--help")
    page = header("nook", "run untrusted code in local sandboxes", version)
    page += synopsis(usage_lines(text))
    # the top-level help without its command list, which becomes COMMANDS below
    kept, skipping = [], False
    for line in text.split("\n"):
        if line.startswith("Commands:"):
            skipping = True
            continue
        if skipping and not line.strip():
            skipping = False
        if not skipping:
            kept.append(line)
    page += ".SH DESCRIPTION\n" + render_help("\n".join(kept), skip_usage=True)
    page += ".SH COMMANDS\n"
    for cmd, summary, subs, _ in docs:
        ref = f"\\fBnook\\-{esc(cmd)}\\fR(1)" if f"nook-{cmd}" in pages else f"\\fBnook {esc(cmd)} \\-\\-help\\fR"
        page += f".TP\n.B {esc('nook ' + cmd)}\n{esc(summary)}; see {ref}.\n"
    page += FILES.replace("LIBEXECDIR", esc(libexecdir)).replace("LIBDIR", esc(libdir))
    page += ".SH SEE ALSO\n" + ",\n".join(f".BR {esc(p)} (1)" for p in sorted(pages) if p != "nook") + "\n"
    return page


def main():
    if len(sys.argv) < 7:
        sys.exit("usage: gen_man.py NOOK OUTDIR VERSION LIBEXECDIR LIBDIR PAGE...")
    nook, outdir, version, libexecdir, libdir = sys.argv[1:6]
    pages = set(sys.argv[6:])
    docs = []
    for line in run(nook, "__doc").splitlines():
        cmd, summary, subs, subs_help = line.split("\t")
        docs.append((cmd, summary, subs.split(), subs_help == "1"))
    known = {f"nook-{d[0]}" for d in docs} | {"nook"}
    for p in sorted(pages - known):
        sys.exit(f"gen_man.py: man/meson.build declares {p}.1 but nook has no command '{p[5:]}'")
    for d in docs:
        if f"nook-{d[0]}" not in pages:
            print(f"gen_man.py: warning: nook {d[0]} has no man page: man/meson.build did not find its"
                  f" {{ \"{d[0]}\", cmd_... }} entry in src/cli/main.c",
                  file=sys.stderr)
    for cmd, summary, subs, subs_help in docs:
        if f"nook-{cmd}" in pages:
            with open(os.path.join(outdir, f"nook-{cmd}.1"), "w") as f:
                f.write(command_page(nook, cmd, summary, subs, subs_help, version))
    with open(os.path.join(outdir, "nook.1"), "w") as f:
        f.write(main_page(nook, docs, pages, version, libexecdir, libdir))


main()
