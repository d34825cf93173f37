// SPDX-License-Identifier: Apache-2.0
"use strict";
// exec under load, the same under Node and Bun (run.sh runs this file under each runtime):
// a running command holds no thread of the runtime's pool, every byte of concurrent outputs
// arrives, stdin reaches the command with its EOF, a slow reader gets everything.
const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");
const { Readable } = require("node:stream");
const { PKG, HOME, nook, uniqueName, removeHome } = require("./helpers.js");
const { Sandboxes } = nook;

const RUNTIME = typeof process.versions.bun === "string" ? `bun ${process.versions.bun}` : `node ${process.version}`;
const sandboxes = new Sandboxes({ home: HOME });
let box;

// A known, different 64 KiB per index: base64 of seeded pseudo-random bytes (printable, so it
// survives exec's utf8 decoding byte for byte).
function known(i, size = 64 * 1024) {
  const out = [];
  let have = 0;
  for (let n = 0; have < size; n++) {
    const chunk = crypto.createHash("sha512").update(`nook-${i}-${n}`).digest("base64");
    out.push(chunk);
    have += chunk.length;
  }
  return out.join("").slice(0, size);
}

function firstDifference(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

function assertSame(got, want, what) {
  const at = firstDifference(got, want);
  assert.equal(at, -1, `${what}: ${got.length} bytes of ${want.length}, first difference at byte ${at}`);
}

before(async () => {
  box = await sandboxes.create(uniqueName("io"), {});
});

after(async () => {
  await removeHome();
});

test("16 concurrent exec('sleep 1') take about 1 s, and fs work is not queued behind them", async (t) => {
  const t0 = performance.now();
  const all = Promise.all(Array.from({ length: 16 }, () => box.exec("sleep 1")));
  // the commands are running now (each one's start went through the pool and came back)
  await new Promise((resolve) => setTimeout(resolve, 300));
  const r0 = performance.now();
  await fs.promises.readFile(__filename);
  const readMs = performance.now() - r0;
  const results = await all;
  const totalMs = performance.now() - t0;
  t.diagnostic(`${RUNTIME}: 16 x sleep 1 in ${Math.round(totalMs)} ms; readFile meanwhile ${readMs.toFixed(1)} ms`);
  for (const r of results) assert.deepEqual([r.exitCode, r.reason], [0, "exited"]);
  // one pool thread per running command would make this 4 rounds of 1 s (4 threads)
  assert.ok(totalMs < 3000, `16 concurrent sleeps took ${Math.round(totalMs)} ms`);
  assert.ok(readMs < 500, `fs.promises.readFile waited ${readMs.toFixed(1)} ms behind running execs`);
});

test("20 concurrent execs each print a known 64 KiB: every byte arrives", async () => {
  const want = Array.from({ length: 20 }, (_, i) => known(i));
  await Promise.all(want.map((text, i) => box.writeFile(`/known-${i}.txt`, text)));
  const results = await Promise.all(want.map((_, i) => box.exec(["cat", `/workspace/known-${i}.txt`])));
  results.forEach((r, i) => {
    assert.deepEqual([r.exitCode, r.reason, r.truncated], [0, "exited", false], `exec ${i}: ${r.stderr}`);
    assertSame(r.stdout, want[i], `exec ${i}`);
  });
});

test("stdin round trip: 20 concurrent cats get their input and its EOF", async () => {
  const want = Array.from({ length: 20 }, (_, i) => known(100 + i));
  const results = await Promise.all(want.map((text) => box.exec("cat", { stdin: text, timeoutMs: 30_000 })));
  results.forEach((r, i) => {
    assert.deepEqual([r.exitCode, r.reason], [0, "exited"], `cat ${i} did not end on EOF: ${r.reason}`);
    assertSame(r.stdout, want[i], `cat ${i}`);
  });
});

test("stdin larger than a pipe, from a stream in pieces through spawn, then EOF", async () => {
  const want = known(200, 1024 * 1024);
  const pieces = [];
  for (let at = 0; at < want.length; at += 100_000) pieces.push(Buffer.from(want.slice(at, at + 100_000)));
  const p = box.spawn("wc -c; echo done >&2", { stdin: Readable.from(pieces), timeoutMs: 30_000 });
  let err = "";
  let out = "";
  p.stdout.on("data", (c) => (out += c));
  p.stderr.on("data", (c) => (err += c));
  const res = await p.wait();
  assert.deepEqual([res.exitCode, res.reason], [0, "exited"]);
  assert.equal(out.trim(), String(want.length));
  assert.equal(err, "done\n");
});

test("a slow reader of a large output gets every byte (the pipe waits, nothing is dropped)", async () => {
  const want = known(300, 2 * 1024 * 1024);
  await box.writeFile("/large.txt", want);
  const p = box.spawn(["cat", "/workspace/large.txt"]);
  const chunks = [];
  for await (const chunk of p.stdout) {
    chunks.push(chunk);
    if (chunks.length % 8 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const res = await p.wait();
  assert.equal(res.exitCode, 0);
  assertSame(Buffer.concat(chunks).toString("latin1"), want, "slow reader");
});

test("a command that never reads its stdin still ends; the unread input is dropped", async () => {
  const res = await box.exec("exec 0<&-; echo ok", { stdin: known(400, 512 * 1024), timeoutMs: 30_000 });
  assert.deepEqual([res.exitCode, res.stdout], [0, "ok\n"]);
});

test("output still in the pipe when the command exits reaches a reader that starts late", async () => {
  // more than the JS-side buffers hold, less than they and the pipe hold together: the command
  // exits with the rest of its output waiting in the pipe
  const want = known(500, 120 * 1024);
  await box.writeFile("/late.txt", want);
  const p = box.spawn(["cat", "/workspace/late.txt"]);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const chunks = [];
  for await (const chunk of p.stdout) chunks.push(chunk);
  assert.equal((await p.wait()).exitCode, 0);
  assertSame(Buffer.concat(chunks).toString("latin1"), want, "late reader");
});

test("a spawn whose reader destroyed stdout still reports its exit", async () => {
  const p = box.spawn(["head", "-c", String(4 * 1024 * 1024), "/dev/zero"]);
  p.stdout.destroy();
  p.stderr.resume();
  const res = await p.wait();
  assert.equal(res.reason, "exited");
});

test("the addon's exec calls refuse arguments that are not theirs", async () => {
  const addon = require(path.join(PKG, "lib", "binding.js"));
  const invalid = { code: "invalid" };
  assert.throws(() => addon.execStart(HOME, box.name, { shell: "true" }), invalid);
  assert.throws(() => addon.execStart(HOME, box.name, { shell: "true" }, "not a function"), invalid);
  for (const fn of ["execResume", "execClosePipe", "execWrite", "execEndStdin", "execCancel", "execClose"])
    assert.throws(() => addon[fn]({}, 0), invalid, fn);
  let exited;
  const done = new Promise((resolve) => (exited = resolve));
  const handle = addon.execStart(HOME, box.name, { shell: "cat", stdin: true }, (kind, value) => {
    if (kind === "exit" || kind === "error") exited([kind, value]);
    return true;
  });
  assert.throws(() => addon.execResume(handle, 2), invalid);
  assert.throws(() => addon.execClosePipe(handle, -1), invalid);
  assert.throws(() => addon.execWrite(handle, "a string"), invalid);
  assert.equal(addon.execWrite(handle, Buffer.from("x")), 1); // all written now
  addon.execEndStdin(handle);
  assert.equal(addon.execWrite(handle, Buffer.from("after EOF")), -1); // dropped: stdin is closed
  const [kind, res] = await done;
  assert.deepEqual([kind, res.exitCode], ["exit", 0]);
  // one kind of handle for another is refused (the handles are type-tagged), never dereferenced:
  // a workspace handle read as an exec, an exec handle as a workspace
  const ws = box._ws;
  assert.throws(() => addon.execWrite(ws, Buffer.from("x")), invalid, "a workspace handle as an exec");
  assert.throws(() => addon.execCancel(ws), invalid);
  assert.throws(() => addon.wsRead(handle, "x", 0), invalid, "an exec handle as a workspace");
  assert.throws(() => addon.wsExists(handle, "x"), invalid);
  addon.execClose(handle);
  addon.execClose(handle); // twice is fine
  addon.execCancel(handle); // after the end: nothing to do
});

test("Box and ExecProcess come from the library only, whatever their constructors are given", () => {
  const { Box, ExecProcess } = nook;
  const invalid = { code: "invalid" };
  assert.throws(() => new Box(sandboxes, box.name, {}), invalid, "new Box with a made-up handle");
  assert.throws(() => new Box(sandboxes, box.name, box._ws), invalid, "new Box even with a real handle");
  assert.throws(() => new ExecProcess({ done: Promise.resolve() }), invalid);
});

// Every environment (the main thread, each worker) keeps its own SandboxError class and watch
// loop (addon_env, the instance data): a worker that loaded the package used to replace the one
// process-wide class, so the main thread's errors stopped being SandboxErrors (Node) or the
// process aborted on the foreign reference (Bun 1.3 and 1.4).
test("a worker that loads the package leaves the main thread's errors SandboxErrors", async () => {
  const { Worker } = require("node:worker_threads");
  const isNotFound = (e) => e instanceof nook.SandboxError && e.code === "not_found";
  const w = new Worker(
    `const { parentPort, workerData } = require("node:worker_threads");
     const { Sandboxes, SandboxError } = require(workerData.pkg);
     setInterval(() => {}, 1 << 30); // alive until terminated (Bun 1.3's terminate() of a worker
                                     // that ended by itself never settles)
     new Sandboxes({ home: workerData.home }).get("no-such-sandbox-w").catch((e) => {
       parentPort.postMessage(e instanceof SandboxError && e.code === "not_found");
     });`,
    { eval: true, workerData: { pkg: PKG, home: HOME } },
  );
  assert.equal(await new Promise((resolve, reject) => { w.once("message", resolve); w.once("error", reject); }), true,
    "the worker's own errors are its SandboxErrors");
  await assert.rejects(sandboxes.get("no-such-sandbox-m"), isNotFound, `main thread, worker alive (${RUNTIME})`);
  assert.throws(() => new Sandboxes({ home: 5 }), (e) => e instanceof nook.SandboxError, "a sync error too");
  await w.terminate();
  await assert.rejects(sandboxes.get("no-such-sandbox-m"), isNotFound, `main thread, worker gone (${RUNTIME})`);
  const r = await box.exec("echo after");
  assert.equal(r.stdout, "after\n", "exec works after the worker's environment ended");
});

test("a worker terminated with an exec running: the process lives on, the command is killed", async () => {
  // The worker's environment ends with the exec's watches still live: exec.c closes them (and
  // with them the command) in a cleanup hook before the watch loop goes; its finalizer, run
  // later by the runtime, found the loop freed before (a segfault of the whole process).
  const { Worker } = require("node:worker_threads");
  const pidFile = path.join(box.hostPath("/"), "worker-cmd.pid");
  const w = new Worker(
    `const { parentPort, workerData } = require("node:worker_threads");
     const { Sandboxes } = require(workerData.pkg);
     new Sandboxes({ home: workerData.home }).get(workerData.name).then((b) => {
       b.exec("echo $$ > /workspace/worker-cmd.pid; exec sleep 30").catch(() => {});
       parentPort.postMessage("started");
     });`,
    { eval: true, workerData: { pkg: PKG, home: HOME, name: box.name } },
  );
  assert.equal(await new Promise((resolve, reject) => { w.once("message", resolve); w.once("error", reject); }), "started");
  for (let i = 0; i < 100 && !fs.existsSync(pidFile); i++) await new Promise((r) => setTimeout(r, 20));
  const pid = fs.readFileSync(pidFile, "utf8").trim();
  assert.match(pid, /^[0-9]+$/);
  assert.equal((await box.exec(`kill -0 ${pid}`)).exitCode, 0, "the worker's command runs");
  await w.terminate();
  let alive = true;
  for (let i = 0; i < 100 && alive; i++) {
    alive = (await box.exec(`kill -0 ${pid} 2>/dev/null`)).exitCode === 0;
    if (alive) await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(alive, false, `the worker's command (pid ${pid} in the sandbox) was killed with the worker (${RUNTIME})`);
  fs.rmSync(pidFile, { force: true });
});

test(`an exec's reason says how it ended, even when its deadline comes as it ends (${RUNTIME})`, async () => {
  // With a deadline of 1-3 ms the timeout's kill often meets a command already ending: the
  // reason was "timeout" then, for a command that exited 0 (an orchestrator threw the result away).
  const results = [];
  for (let i = 0; i < 60; i++) results.push(await box.exec("echo hi", { timeoutMs: 1 + (i % 3) }));
  for (const r of results) {
    if (r.reason === "timeout") assert.equal(r.signal, "SIGKILL", `a timeout is the kill's end: ${JSON.stringify(r)}`);
    else assert.deepEqual([r.reason, r.exitCode, r.stdout], ["exited", 0, "hi\n"], JSON.stringify(r));
  }
});
