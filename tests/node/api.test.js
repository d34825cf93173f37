// SPDX-License-Identifier: Apache-2.0
"use strict";
// The Sandboxes/Box API against the real addon and real sandboxes (NOOK_HOME: a temp dir).
const { test, describe, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { execFileSync } = require("node:child_process");
const { PassThrough, Readable } = require("node:stream");
const { HOME, PKG, nook, uniqueName, sleep, removeHome } = require("./helpers.js");
const { Sandboxes, SandboxError } = nook;

const sandboxes = new Sandboxes({ home: HOME });
let box;
const NAME = uniqueName("api");

async function rejectsWith(promiseOrFn, code) {
  await assert.rejects(typeof promiseOrFn === "function" ? promiseOrFn() : promiseOrFn, (err) => {
    assert.ok(err instanceof SandboxError, `expected a SandboxError, got ${err}`);
    assert.ok(err instanceof Error);
    assert.equal(err.code, code, `${err.code}: ${err.message}`);
    return true;
  });
}

function throwsWith(fn, codes) {
  assert.throws(fn, (err) => {
    assert.ok(err instanceof SandboxError, `expected a SandboxError, got ${err}`);
    assert.ok([].concat(codes).includes(err.code), `${err.code}: ${err.message}`);
    return true;
  });
}

// The command forks a grandchild that ignores SIGTERM and records its pid: a kill of the
// first process only, or a polite SIGTERM, would leave it running.
const TREE = `trap '' TERM; (trap '' TERM; sleep 60; echo alive > /workspace/tree-alive) & echo $! > /workspace/tree.pid; sleep 60`;

async function assertTreeGone(b) {
  const pid = (await b.readFile("/tree.pid", "utf8")).trim();
  assert.match(pid, /^\d+$/);
  const res = await b.exec(`kill -0 ${pid} 2>/dev/null && echo running || echo gone`);
  assert.equal(res.stdout.trim(), "gone", `grandchild ${pid} survived`);
}

before(async () => {
  box = await sandboxes.create(NAME, {});
});

after(async () => {
  await removeHome();
});

describe("sandboxes", () => {
  test("workspaceDir is known before create and creates nothing", () => {
    const name = uniqueName("pre");
    const dir = sandboxes.workspaceDir(name);
    assert.equal(dir, path.join(HOME, "workspaces", name));
    assert.equal(fs.existsSync(dir), false);
  });

  test("workspaceDir of a box is the same host path", () => {
    assert.equal(box.workspaceDir, sandboxes.workspaceDir(NAME));
    assert.ok(fs.statSync(box.workspaceDir).isDirectory());
  });

  test("invalid names are refused by libnook", async () => {
    throwsWith(() => sandboxes.workspaceDir("../x"), "invalid");
    await rejectsWith(sandboxes.create("Bad Name", {}), "invalid");
  });

  test("get: a Box for an existing sandbox, not_found otherwise", async () => {
    const again = await sandboxes.get(NAME);
    assert.equal(again.name, NAME);
    assert.equal(again.workspaceDir, box.workspaceDir);
    await rejectsWith(sandboxes.get(uniqueName("missing")), "not_found");
  });

  test("list shows the sandbox running", async () => {
    const all = await sandboxes.list();
    const me = all.find((s) => s.name === NAME);
    assert.ok(me);
    assert.equal(me.state, "running");
  });

  test("spec: unknown fields and bad values are invalid, a missing snapshot is refused", async () => {
    await rejectsWith(sandboxes.create(uniqueName("spec"), { nope: 1 }), "invalid");
    await rejectsWith(sandboxes.create(uniqueName("spec"), { pullPolicy: "sometimes" }), "invalid");
    await rejectsWith(sandboxes.create(uniqueName("spec"), { persistence: "forever" }), "invalid");
    await rejectsWith(sandboxes.create(uniqueName("spec"), { snapshot: "no-such-snapshot" }), "not_found");
  });

  test("creating a running name again is refused with exists", async () => {
    await rejectsWith(sandboxes.create(NAME, {}), "exists");
  });

  test("a removed sandbox's supervisor leaves no zombie in this process", async () => {
    // Supervisors are this process's children (no daemonizing fork); libnook reaps them.
    const name = uniqueName("reap");
    const b = await sandboxes.create(name, {});
    const { supervisorPid } = await b.inspect();
    assert.ok(supervisorPid > 0);
    const ppid = fs.readFileSync(`/proc/${supervisorPid}/stat`, "utf8").split(") ")[1].split(" ")[1];
    assert.equal(Number(ppid), process.pid, "the supervisor is our child");
    await sandboxes.remove(name);
    assert.equal(fs.existsSync(`/proc/${supervisorPid}`), false, "no zombie left behind");
  });

});

describe("snapshots", () => {
  test("a running sandbox is refused with state", async () => {
    await rejectsWith(box.snapshot(uniqueName("snap")), "state");
  });

  test("an ephemeral stopped sandbox is refused with state (its layer is gone)", async () => {
    const name = uniqueName("eph");
    const eph = await sandboxes.create(name, {});
    await eph.exec("echo x > /etc/eph-marker");
    await eph.stop();
    await assert.rejects(eph.snapshot(uniqueName("snap")), (err) => {
      assert.ok(err instanceof SandboxError);
      assert.equal(err.code, "state", err.message);
      assert.match(err.message, /ephemeral/);
      return true;
    });
    await sandboxes.remove(name);
  });

  test("bad options are invalid", async () => {
    await rejectsWith(box.snapshot("x", "yes"), "invalid");
    await rejectsWith(box.snapshot("Bad Name!"), "invalid");
  });

  test("a stopped sticky sandbox: snapshot, boot another from it, list, inspect, remove", async () => {
    const src = uniqueName("sticky");
    const snap = uniqueName("snap");
    const copy = uniqueName("fromsnap");
    const s = await sandboxes.create(src, { persistence: "sticky" });
    // one file in the root layer, one in the workspace
    assert.equal((await s.exec("echo from-root > /etc/nook-node-marker")).exitCode, 0);
    await s.writeFile("/data/w.txt", "from-workspace\n");
    await s.stop();

    const info = await s.snapshot(snap, { withWorkspace: true });
    assert.equal(info.name, snap);
    assert.match(info.digest, /^sha256:[0-9a-f]{64}$/);
    assert.equal(info.sourceSandbox, src);
    assert.equal(info.withWorkspace, true);
    assert.equal(info.base, "host");

    const b2 = await sandboxes.create(copy, { snapshot: snap });
    const res = await b2.exec("cat /etc/nook-node-marker /workspace/data/w.txt");
    assert.equal(res.exitCode, 0, res.stderr);
    assert.equal(res.stdout, "from-root\nfrom-workspace\n");

    const all = await sandboxes.snapshots();
    assert.ok(all.some((x) => x.name === snap && x.digest === info.digest));
    const again = await sandboxes.inspectSnapshot(info.digest);
    assert.equal(again.name, snap);
    assert.ok((again.usedBy ?? []).some((u) => u.sandbox === copy), JSON.stringify(again.usedBy));
    await rejectsWith(sandboxes.removeSnapshot(snap), "busy");
    await rejectsWith(s.snapshot(snap), "exists");

    // without the workspace; no name: libnook picks "<sandbox>-<epoch>"
    const rootOnly = await s.snapshot();
    assert.ok(rootOnly.name.startsWith(`${src}-`), rootOnly.name);
    assert.equal(rootOnly.withWorkspace, false);
    // another right after (within the same second, after a change to the layer: the same
    // content is stored once): a name of its own, not "exists"
    await s.start();
    assert.equal((await s.exec("echo changed > /etc/nook-node-marker2")).exitCode, 0);
    await s.stop();
    const more = [await s.snapshot(null)];
    assert.equal(new Set([rootOnly.name, ...more.map((x) => x.name)]).size, 2, more.map((x) => x.name).join(" "));

    await sandboxes.remove(copy);
    await sandboxes.removeSnapshot(snap);
    for (const x of [rootOnly, ...more]) await sandboxes.removeSnapshot(x.name);
    await rejectsWith(sandboxes.inspectSnapshot(snap), "not_found");
    await sandboxes.remove(src);
  });
});

describe("options", () => {
  // Every options object refuses what it does not know and checks the types of what it does
  // (lib/options.js): a typo never means "off", and nothing is done before the refusal.
  async function refused(p, re) {
    await assert.rejects(p, (e) => {
      assert.ok(e instanceof SandboxError && e.code === "invalid", String(e));
      assert.match(e.message, re);
      return true;
    });
  }

  test("a typo or a wrong type is refused, naming the option, and changes nothing", async () => {
    const main = await sandboxes.create(uniqueName("opt"), {});
    await main.writeFile("app.js", "v1\n");
    await main.stop(); // a branch of a stopped sandbox needs no freezer (the user stages have none)
    const br = await sandboxes.branch(main.name, uniqueName("optb"));
    await br.writeFile("app.js", "v2\n");
    await refused(br.merge({ dryrun: true }), /merge: unknown option 'dryrun'; did you mean 'dryRun'\?/);
    await refused(br.merge({ dryRun: "yes" }), /merge: option 'dryRun' must be a boolean, not "yes"/);
    assert.equal(await main.readFile("app.js", "utf8"), "v1\n", "a refused merge changed the target");
    const report = await br.merge({ dryRun: true });
    assert.equal(report.dryRun, true);
    assert.equal(await main.readFile("app.js", "utf8"), "v1\n", "a dry run changed the target");

    await refused(br.diff({ patch: 1 }), /diff: option 'patch' must be a boolean, not 1/);
    await refused(br.diff("patch"), /diff: the options must be an object, not string/);
    await refused(br.snapshot("x", { withworkspace: true }), /snapshot: unknown option 'withworkspace'; did you mean 'withWorkspace'\?/);
    await br.start();
    await refused(br.stop({ timeout: 100 }), /stop: unknown option 'timeout'; did you mean 'timeoutMs'\?/);
    await refused(sandboxes.stop(br.name, { timeoutMs: "100" }), /stop: option 'timeoutMs' must be a non-negative number, not "100"/);
    assert.equal((await br.exec("true")).exitCode, 0, "a refused stop stopped the sandbox");
    await assert.rejects(br.stop({ timeoutMs: 2 * 3600 * 1000 }), (e) => e.code === "invalid" && /more than an hour/.test(e.message));
    assert.equal((await br.exec("true")).exitCode, 0, "a stop refused for its timeout stopped the sandbox");
    // timeoutMs 0 kills at once (it meant the 10 s default): a command that ignores SIGTERM
    const stubborn = br.exec("trap '' TERM; while :; do sleep 1; done").catch((e) => e);
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    await br.stop({ timeoutMs: 0 });
    assert.ok(Date.now() - t0 < 6000, `stop({ timeoutMs: 0 }) took ${Date.now() - t0} ms`);
    await stubborn;
    await br.start();
    await refused(sandboxes.branch(main.name, uniqueName("x"), { Count: 3 }), /branch: unknown option 'Count'; did you mean 'count'\?/);
    await refused(sandboxes.create(uniqueName("x"), {}, { replce: true }), /create: unknown option 'replce' \(known: replace\)/);
    await refused(sandboxes.create(uniqueName("x"), { pidsMax: 10n }), /Invalid spec: it cannot be written as JSON/);
    assert.throws(() => new Sandboxes({ hom: HOME }), /new Sandboxes: unknown option 'hom' \(known: home\)/);
    assert.throws(() => new Sandboxes({ home: 5 }), /new Sandboxes: the home must be a string, not 5/);
    await refused(sandboxes.get(5), /get: the name must be a string, not 5/);
    await refused(sandboxes.create({ name: "x" }), /create: the name must be a string, not \{"name":"x"\}/);
    await refused(sandboxes.branch(main.name, null), /branch: the name must be a string, not null/);
    assert.throws(() => sandboxes.workspaceDir(undefined), /workspaceDir: the name must be a string, not undefined/);
    await refused(br.readFile("app.js", { maxBytes: "3" }), /readFile: option 'maxBytes' must be a positive integer, not "3"/);
    await refused(br.readFile("app.js", { maxBytes: 0 }), /readFile: option 'maxBytes' must be a positive integer, not 0/);
    await refused(br.readFile("app.js", "utf-9"), /readFile: unknown encoding "utf-9"/);
    await refused(br.readFile("app.js", { maxBytes: 2 }), /larger than the limit of 2 bytes/);
    assert.equal(await br.readFile("app.js", { encoding: "utf8", maxBytes: 3 }), "v2\n");
    const names = (await sandboxes.list()).map((x) => x.name);
    assert.deepEqual(names.filter((n) => n.startsWith("x-")), [], "a refused create or branch made a sandbox");
    await sandboxes.remove(br.name);
    await sandboxes.remove(main.name);
  });
});

describe("files", () => {
  test("write -> exec cat -> read back", async () => {
    await box.writeFile("/src/main.txt", "hello from the host\n");
    const res = await box.exec("cat src/main.txt");
    assert.equal(res.exitCode, 0);
    assert.equal(res.stdout, "hello from the host\n");
    await box.exec("mkdir -p dist && printf 'bundle' > dist/out.bin");
    const buf = await box.readFile("/dist/out.bin");
    assert.ok(Buffer.isBuffer(buf));
    assert.equal(buf.toString(), "bundle");
    assert.equal(await box.readFile("/workspace/dist/out.bin", "utf8"), "bundle");
  });

  test("paths: a trailing slash names a directory; a lone surrogate or a non-string is refused", async () => {
    await rejectsWith(box.writeFile("tsdir/", "x"), "invalid");
    assert.equal(box.exists("tsdir"), false, "a write to 'tsdir/' made a file 'tsdir'");
    await box.mkdir("tsdir/");
    await rejectsWith(box.readFile("tsdir/"), "invalid");
    await assert.rejects(box.writeFile("bad\ud800", "x"), /lone UTF-16 surrogate/);
    assert.equal(box.exists("bad\ufffd"), false, "a lone surrogate was written as U+FFFD");
    throwsWith(() => box.exists("bad\udc00x"), "invalid");
    await assert.rejects(box.writeFile(42, "x"), /writeFile: the path must be a string, not number/);
    await assert.rejects(box.readFile(null), /readFile: the path must be a string, not null/);
  });

  test("binary data round trips", async () => {
    const data = Buffer.alloc(300 * 1024);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7) & 0xff;
    await box.writeFile("bin/blob", data);
    assert.ok((await box.readFile("/bin/blob")).equals(data));
    const res = await box.exec(["wc", "-c", "/workspace/bin/blob"]);
    assert.match(res.stdout, /^307200 /);
  });

  test("exists is synchronous and does not read", async () => {
    await box.writeFile("/e/x", "x");
    assert.equal(box.exists("/e/x"), true);
    assert.equal(box.exists("/workspace/e/x"), true);
    assert.equal(box.exists("/e/none"), false);
  });

  test("hostPath is the absolute host path", () => {
    assert.equal(box.hostPath("/src/main.txt"), path.join(box.workspaceDir, "src/main.txt"));
    assert.equal(box.hostPath("/workspace/src/main.txt"), path.join(box.workspaceDir, "src/main.txt"));
  });

  test("200 concurrent writes to one box all land whole", async () => {
    const names = Array.from({ length: 200 }, (_, i) => `/many/d${i % 10}/f${i}.txt`);
    const body = (i) => `file ${i}\n`.repeat(50);
    await Promise.all(names.map((n, i) => box.writeFile(n, body(i))));
    const back = await Promise.all(names.map((n) => box.readFile(n, "utf8")));
    back.forEach((text, i) => assert.equal(text, body(i)));
  });

  test("writes racing remove: each lands or is not_found, nothing is left", async () => {
    const name = uniqueName("wsrace");
    const b = await sandboxes.create(name, {});
    const dir = b.workspaceDir;
    const writes = Array.from({ length: 200 }, (_, i) =>
      b.writeFile(`/r/f${i}`, "x").then(() => "ok", (err) => `${err.code}: ${err.message}`));
    const removed = sandboxes.remove(name);
    const results = await Promise.all(writes);
    await removed;
    for (const r of results) assert.ok(r === "ok" || r.startsWith("not_found:"), r);
    assert.equal(fs.existsSync(dir), false);
    await rejectsWith(b.writeFile("/after", "x"), "not_found");
  });

  test("a missing file is not_found", async () => {
    await rejectsWith(box.readFile("/no/such"), "not_found");
  });

  for (const bad of ["/../../etc/passwd", "/workspace/../x", "a/../b", "../x", "/workspace/../../../etc/x"]) {
    test(`path ${JSON.stringify(bad)} is refused everywhere`, async () => {
      await rejectsWith(box.writeFile(bad, "x"), "refused");
      await rejectsWith(box.readFile(bad), "refused");
      throwsWith(() => box.exists(bad), "refused");
      throwsWith(() => box.hostPath(bad), "refused");
    });
  }

  test("a path with a NUL byte is refused or invalid", async () => {
    const bad = "/ok\0/../../etc/passwd";
    await rejectsWith(box.writeFile(bad, "x"), "invalid");
    await rejectsWith(box.readFile(bad), "invalid");
    throwsWith(() => box.exists(bad), ["invalid", "refused"]);
    throwsWith(() => box.hostPath(bad), ["invalid", "refused"]);
  });

  test("a symlink out of the workspace, made by a command, is never followed", async () => {
    const res = await box.exec("ln -s /etc /workspace/etc-link && ln -s /etc/hostname /workspace/host-link && ln -s ../../.. /workspace/up");
    assert.equal(res.exitCode, 0, res.stderr);
    await rejectsWith(box.readFile("/etc-link/passwd"), "refused");
    await rejectsWith(box.writeFile("/etc-link/nook-escape", "x"), "refused");
    await rejectsWith(box.readFile("/up/etc/passwd"), "refused");
    throwsWith(() => box.hostPath("/etc-link/passwd"), "refused");
    await assert.rejects(box.readFile("/host-link"), SandboxError);
    assert.equal(fs.existsSync("/etc/nook-escape"), false);
    // in place, a link out is refused and nothing is written through it
    await rejectsWith(box.writeFile("/etc-link/hostname", "x", { inPlace: true }), "refused");
    await rejectsWith(box.writeFile("/up/etc/hostname", "x", { inPlace: true }), "refused");
    // writing over a symlink replaces the link, never writes through it
    await box.writeFile("/host-link", "replaced");
    assert.equal(fs.lstatSync(path.join(box.workspaceDir, "host-link")).isSymbolicLink(), false);
  });

  test("inPlace writes into the file: a hard link a command made sees it, the inode stays", async () => {
    await box.writeFile("/ip/log.txt", "first\n");
    const made = await box.exec("ln /workspace/ip/log.txt /workspace/ip/alias.txt && stat -c %i /workspace/ip/log.txt");
    assert.equal(made.exitCode, 0, made.stderr);
    await box.writeFile("/ip/log.txt", "second\n", { inPlace: true });
    const res = await box.exec("stat -c %i /workspace/ip/log.txt; cat /workspace/ip/alias.txt");
    assert.equal(res.stdout, `${made.stdout}second\n`, "same inode, and the other name sees the bytes");
    await box.writeFile("/ip/log.txt", "third\n");
    assert.equal((await box.readFile("/ip/alias.txt", "utf8")), "second\n", "the default write replaces the name only");
    await box.mkdir("/ip/dir");
    await rejectsWith(box.writeFile("/ip/dir", "x", { inPlace: true }), "invalid");
    await assert.rejects(box.writeFile("/ip/x", "x", { inPlace: "yes" }), /writeFile: option 'inPlace' must be a boolean/);
    await assert.rejects(box.writeFile("/ip/x", "x", { atomic: false }), /writeFile: unknown option 'atomic'/);
    assert.equal(box.exists("/ip/x"), false, "a refused option wrote nothing");
  });
});

describe("exec", () => {
  test("a string runs with /bin/sh -lc, an array is argv", async () => {
    const a = await box.exec("echo $0; exit 3");
    assert.equal(a.exitCode, 3);
    assert.equal(a.reason, "exited");
    assert.equal(a.signal, null);
    const b = await box.exec(["printf", "%s|", "a b", "$HOME"]);
    assert.equal(b.stdout, "a b|$HOME|");
  });

  test("env, secretEnv, cwd, stdin and stderr", async () => {
    await box.writeFile("/sub/f", "");
    const res = await box.exec("pwd; echo $A-$S; cat; echo oops >&2", {
      env: { A: "plain" },
      secretEnv: { S: "hidden" },
      cwd: "/workspace/sub",
      stdin: "from-stdin\n",
    });
    assert.equal(res.stdout, "/workspace/sub\nplain-hidden\nfrom-stdin\n");
    assert.equal(res.stderr, "oops\n");
  });

  test("invalid env names are invalid", async () => {
    await rejectsWith(box.exec("true", { env: { "BAD-NAME": "x" } }), "invalid");
  });

  test("env and secretEnv names holding '=', a newline, NUL or nothing are refused", async () => {
    for (const key of ["PATH=/evil:", "LD_PRELOAD=/workspace/x.so\nZ", "A\nB", "A\0B", ""]) {
      await rejectsWith(box.exec("true", { env: { [key]: "x" } }), "invalid");
      await rejectsWith(box.exec("true", { secretEnv: { [key]: "x" } }), "invalid");
    }
    const res = await box.exec("echo \"$PATH\"", { env: { OK_1: "v\nw=z" } });
    assert.ok(!res.stdout.includes("/evil"), res.stdout);
  });

  test("exec in a sandbox that does not exist fails", async () => {
    const ghost = await sandboxes.create(uniqueName("ghost"), {});
    await sandboxes.remove(ghost.name);
    await assert.rejects(ghost.exec("true"), (err) => err instanceof SandboxError && ["not_found", "state"].includes(err.code));
  });

  test("maxOutputBytes caps what is captured and marks truncated", async () => {
    const res = await box.exec("head -c 100000 /dev/zero | tr '\\0' a", { maxOutputBytes: 1000 });
    assert.equal(res.stdout.length, 1000);
    assert.equal(res.truncated, true);
    const full = await box.exec("head -c 3000000 /dev/zero | tr '\\0' b");
    assert.equal(full.stdout.length, 3000000);
    assert.equal(full.truncated, false);
  });

  test("onStdout/onStderr see the chunks as they come", async () => {
    const seen = [];
    const res = await box.exec("echo one; sleep 0.2; echo two >&2", {
      onStdout: (c) => seen.push(`o:${c}`),
      onStderr: (c) => seen.push(`e:${c}`),
    });
    assert.deepEqual(seen, ["o:one\n", "e:two\n"]);
    assert.equal(res.stdout, "one\n");
  });

  test("a background process holding the pipe does not hang exec", async () => {
    const t0 = Date.now();
    const res = await box.exec("sleep 30 & echo started");
    assert.equal(res.stdout, "started\n");
    assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
  });

  test("AbortSignal kills the whole process tree", async () => {
    const ac = new AbortController();
    const t0 = Date.now();
    setTimeout(() => ac.abort(), 500);
    const res = await box.exec(TREE, { signal: ac.signal });
    const took = Date.now() - t0;
    assert.equal(res.reason, "cancelled");
    assert.ok(took < 10000, `cancel took ${took} ms`);
    await assertTreeGone(box);
  });

  test("an already aborted signal cancels at once", async () => {
    const ac = new AbortController();
    ac.abort();
    const t0 = Date.now();
    const res = await box.exec("sleep 30", { signal: ac.signal });
    assert.equal(res.reason, "cancelled");
    assert.ok(Date.now() - t0 < 10000);
  });

  test("timeoutMs kills the whole process tree", async () => {
    const t0 = Date.now();
    const res = await box.exec(TREE, { timeoutMs: 500 });
    const took = Date.now() - t0;
    assert.equal(res.reason, "timeout");
    assert.ok(took < 10000, `timeout took ${took} ms`);
    await assertTreeGone(box);
  });

  test("spawn streams stdout/stderr and wait() reports the exit", async () => {
    const p = box.spawn("for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.05; done; exit 7");
    let out = "";
    let err = "";
    p.stdout.on("data", (c) => (out += c));
    p.stderr.on("data", (c) => (err += c));
    const exit = await p.wait();
    assert.equal(exit.exitCode, 7);
    assert.equal(out, "out1\nout2\nout3\n");
    assert.equal(err, "err1\nerr2\nerr3\n");
  });

  test("spawn with stdin and for-await", async () => {
    const p = box.spawn(["tr", "a-z", "A-Z"], { stdin: "shout\n" });
    let out = "";
    for await (const c of p.stdout) out += c;
    assert.equal(out, "SHOUT\n");
    assert.equal((await p.wait()).exitCode, 0);
  });

  test("spawn kill() kills the tree", async () => {
    const p = box.spawn(TREE);
    await sleep(500);
    p.kill();
    const exit = await p.wait();
    assert.equal(exit.reason, "cancelled");
    await assertTreeGone(box);
  });

  test("a stdin stream the command stops reading: exec resolves, the event loop runs, the source is unpiped", () => {
    // In a child process: before the fix the loop spun on writes to the closed pipe, so not
    // even a timer (or node:test's timeout) could fire.  Two sources: an endless synchronous
    // one (`yes | head -n 1`) and an endless one that pushes 64 KiB whenever asked.
    const script = `
      const { Readable } = require("node:stream");
      const { Sandboxes } = require(${JSON.stringify(PKG)});
      (async () => {
        const box = await new Sandboxes({ home: process.env.NOOK_HOME }).get(${JSON.stringify(NAME)});
        let ticks = 0;
        const timer = setInterval(() => ticks++, 10);
        function* yes() { for (;;) yield "y\\n"; }
        const a = await box.exec("head -n 1", { stdin: Readable.from(yes()) });
        const big = new Readable({ read() { this.push(Buffer.alloc(65536, 120)); } });
        const b = await box.exec("head -c 10", { stdin: big });
        await new Promise((r) => setTimeout(r, 100));
        clearInterval(timer);
        console.log(JSON.stringify({ a: a.stdout, b: b.stdout, ticks: ticks > 0, flowing: big.readableFlowing }));
      })().catch((e) => { console.log(String(e)); process.exit(1); });`;
    const out = execFileSync(process.execPath, ["-e", script], { encoding: "utf8", timeout: 60000, env: process.env });
    assert.deepEqual(JSON.parse(out), { a: "y\n", b: "xxxxxxxxxx", ticks: true, flowing: false });
  });

  test("an unknown exec option is refused, naming it (a typo must not mean 'no timeout')", async () => {
    await assert.rejects(box.exec("echo ran > /workspace/badopt", { timeout: 5 }), (e) => {
      assert.ok(e instanceof SandboxError && e.code === "invalid", String(e));
      assert.match(e.message, /unknown option 'timeout'; did you mean 'timeoutMs'\?/);
      return true;
    });
    await rejectsWith(box.exec("true", "bad"), "invalid");
    await rejectsWith(box.exec("true", null), "invalid");
    assert.throws(() => box.spawn("true", { cwdd: "/tmp" }), /unknown option 'cwdd'/);
    assert.throws(() => box.spawn("true", { onStdout: () => {} }), /option 'onStdout' is exec's only/);
    assert.equal(box.exists("/badopt"), false);
  });

  test("a bad stdin value is refused before the command starts", async () => {
    await rejectsWith(box.exec("echo ran > /workspace/badstdin", { stdin: 5 }), "invalid");
    await rejectsWith(box.exec("echo ran > /workspace/badstdin", { stdin: { a: 1 } }), "invalid");
    assert.throws(() => box.spawn("echo ran > /workspace/badstdin", { stdin: 5 }), (e) => e instanceof SandboxError && e.code === "invalid");
    // a stream already destroyed would never end the command's stdin; one with pipe() alone cannot be unpiped
    const gone = new Readable({ read() {} });
    gone.destroy();
    await assert.rejects(box.exec("cat > /workspace/badstdin", { stdin: gone }), /already destroyed or failed/);
    await rejectsWith(box.exec("echo ran > /workspace/badstdin", { stdin: { pipe() {} } }), "invalid");
    await sleep(300);
    assert.equal(box.exists("/badstdin"), false, "the command ran although exec was refused");
  });

  test("a stdin source that fails kills the command and rejects exec with its error", async () => {
    let n = 0;
    const src = new Readable({
      read() {
        if (n++ === 0) this.push("12345");
        else this.destroy(new Error("src broke"));
      },
    });
    await assert.rejects(box.exec("wc -c", { stdin: src }), (e) => {
      assert.ok(e instanceof SandboxError && e.code === "io", String(e));
      assert.match(e.message, /the stdin stream failed \(src broke\); the command was killed/);
      assert.equal(e.cause?.message, "src broke");
      return true;
    });
  });

  test("a stdin source destroyed before its end (no error) kills the command and rejects exec", async () => {
    const src = new PassThrough();
    src.write("part\n");
    setTimeout(() => src.destroy(), 100);
    await assert.rejects(box.exec("cat; echo finished > /workspace/stdin-finished", { stdin: src }), (e) => {
      assert.ok(e instanceof SandboxError && e.code === "io", String(e));
      assert.match(e.message, /the stdin stream was destroyed before its end; the command was killed/);
      return true;
    });
    await sleep(200);
    assert.equal(box.exists("/stdin-finished"), false, "the command went on with a truncated input");
  });

  test("onStdout and onStderr must be functions, checked before the command starts", async () => {
    await assert.rejects(box.exec("echo ran > /workspace/badcb", { onStdout: "log" }), /onStdout must be a function/);
    await assert.rejects(box.exec("echo ran > /workspace/badcb", { onStderr: 1 }), /onStderr must be a function/);
    await sleep(200);
    assert.equal(box.exists("/badcb"), false, "the command ran although exec was refused");
  });

  test("an onStdout callback that throws: exec rejects with it and the command is killed", async () => {
    const boom = new Error("boom");
    await assert.rejects(
      box.exec("echo $$ > /workspace/cb.pid; echo x; sleep 30", {
        onStdout: () => {
          throw boom;
        },
      }),
      (e) => e === boom,
    );
    const pid = (await box.readFile("/cb.pid", "utf8")).trim();
    const res = await box.exec(`kill -0 ${pid} 2>/dev/null && echo running || echo gone`);
    assert.equal(res.stdout.trim(), "gone");
  });

  test("concurrent execs", async () => {
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => box.exec(`sleep 0.2; echo ${i}`)));
    assert.deepEqual(results.map((r) => r.stdout.trim()), ["0", "1", "2", "3", "4", "5", "6", "7"]);
  });
});

describe("lifetimes", () => {
  test("stop keeps the workspace; create again gets a fresh container over it", async () => {
    const name = uniqueName("life");
    const b = await sandboxes.create(name, {});
    await b.writeFile("/kept.txt", "kept");
    await b.exec("echo x > /etc/ephemeral-marker");
    await b.stop();
    assert.equal((await b.inspect()).state, "stopped");
    assert.equal(fs.readFileSync(path.join(b.workspaceDir, "kept.txt"), "utf8"), "kept");
    await rejectsWith(b.exec("true"), "state");
    const again = await sandboxes.create(name, {});
    assert.equal((await again.exec("cat /workspace/kept.txt")).stdout, "kept");
    assert.equal((await again.exec("test -e /etc/ephemeral-marker && echo yes || echo no")).stdout, "no\n");
    await sandboxes.remove(name);
    assert.equal(fs.existsSync(b.workspaceDir), false);
    await rejectsWith(sandboxes.get(name), "not_found");
  });

  test("a sticky sandbox keeps a file written to /etc across stop and reopen", async () => {
    const name = uniqueName("sticky");
    const b = await sandboxes.create(name, { persistence: "sticky" });
    assert.equal((await b.exec("echo kept > /etc/sticky-marker")).exitCode, 0);
    await b.stop();
    const reopened = await sandboxes.get(name);
    await reopened.start();
    assert.equal((await reopened.exec("cat /etc/sticky-marker")).stdout, "kept\n");
    await reopened.stop();
    const recreated = await sandboxes.create(name, { persistence: "sticky" });
    assert.equal((await recreated.exec("cat /etc/sticky-marker")).stdout, "kept\n");
    await sandboxes.remove(name);
  });

  test("remove is unconditional, running or not", async () => {
    const name = uniqueName("rm");
    const b = await sandboxes.create(name, {});
    await b.writeFile("/x", "x");
    await sandboxes.remove(name);
    assert.equal(fs.existsSync(sandboxes.workspaceDir(name)), false);
    await rejectsWith(sandboxes.remove(name), "not_found");
  });

  test("parseSize is libnook's", () => {
    assert.equal(nook.parseSize("512m"), 512 * 1024 * 1024);
    assert.equal(nook.parseSize("1g"), 1024 ** 3);
    throwsWith(() => nook.parseSize("12 parsecs"), "invalid");
  });
});

// secrets by placeholder (issue #14): needs nook-egress (built by src/egress/) and the network
const EGRESS_BIN = process.env.NOOK_BUILD_DIR && path.join(process.env.NOOK_BUILD_DIR, "src", "egress", "nook-egress");
const egressSkip = !EGRESS_BIN || !fs.existsSync(EGRESS_BIN) ? "nook-egress not built in this tree" : false;

describe("egress", () => {
  test("secrets: the guest sees a placeholder, the value is in no state file; egressLog is an array; inspect().egress", { skip: egressSkip }, async () => {
    const name = uniqueName("egress");
    const value = `nook-sentinel-node-${process.pid}`;
    let b;
    try {
      b = await sandboxes.create(name, {
        network: "public",
        secrets: { TOK: { value, hosts: ["api.example.test"] } },
        egress: { audit: true },
      });
    } catch (err) {
      // a machine without public networking (no /dev/net/tun) refuses the network, never the spec
      assert.ok(err instanceof SandboxError, String(err));
      assert.notEqual(err.code, "invalid", err.message);
      return;
    }
    const env = await b.exec(["sh", "-c", 'printf %s "$TOK"']);
    assert.match(env.stdout, /^nook-ph-[0-9a-f]{32}$/);
    const info = await b.inspect();
    assert.deepEqual(info.spec.secrets, { TOK: { hosts: ["api.example.test"], body: false } });
    assert.ok(!JSON.stringify(info).includes(value), "inspect shows the value");
    const grep = (dir) => fs.readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((d) => d.isFile())
      .some((d) => fs.readFileSync(path.join(d.parentPath ?? d.path, d.name)).includes(value));
    assert.equal(grep(path.join(HOME, "sandboxes", name)), false, "a state file holds the value");
    assert.ok(Array.isArray(await b.egressLog()));
    // the gateway's state is the supervisor's to tell; a killed gateway is started again
    assert.equal(info.egress?.state, "running", JSON.stringify(info.egress));
    assert.equal(info.egress.restarts, 0);
    process.kill(info.egress.pid, "SIGKILL");
    let again;
    for (let i = 0; i < 100; i++) {
      again = (await b.inspect()).egress;
      if (again.state === "running" && again.restarts === 1) break;
      await sleep(100);
    }
    assert.deepEqual({ state: again.state, restarts: again.restarts, lastExit: again.lastExit },
      { state: "running", restarts: 1, lastExit: "killed by signal 9" });
    assert.notEqual(again.pid, info.egress.pid);
    await sandboxes.remove(name);
  });
});
