// SPDX-License-Identifier: Apache-2.0
// Node binding bench, side by side in one run (medians of interleaved rounds):
//   1. 200 x 1 KiB files placed / read back through box.writeFile/readFile vs
//      fs.promises.writeFile/readFile on a plain host directory (target <= 1.3x);
//   2. the Smithers provider's full run() of a trivial entry vs a direct box.exec.
// Usage: NOOK_NODE_ADDON=build-node/bindings/node/nook_node.node node bench/node_files.mjs [rounds]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const PKG = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..", "bindings", "node");
const home = fs.mkdtempSync(path.join(os.tmpdir(), "nook-bench-node-"));
const { Sandboxes } = require(PKG);
const { createNookSandboxProvider } = require(path.join(PKG, "lib", "smithers.js"));

const ROUNDS = Number(process.argv[2] ?? 15);
const N = 200;
const data = Buffer.alloc(1024, 0x61);
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const now = () => Number(process.hrtime.bigint()) / 1e6;

const sandboxes = new Sandboxes({ home });
const box = await sandboxes.create("bench", {});
const plain = fs.mkdtempSync(path.join(os.tmpdir(), "nook-bench-plain-"));

async function timeIt(fn) {
  const t0 = now();
  await fn();
  return now() - t0;
}

const files = Array.from({ length: N }, (_, i) => `d${i % 10}/f${i}.txt`);
for (const d of new Set(files.map((f) => path.dirname(f)))) fs.mkdirSync(path.join(plain, d), { recursive: true });

const t = { boxWrite: [], fsWrite: [], boxRead: [], fsRead: [] };
for (let r = 0; r < ROUNDS; r++) {
  // interleaved, same concurrency (all 200 in flight), so the machine's noise hits both sides
  t.boxWrite.push(await timeIt(() => Promise.all(files.map((f) => box.writeFile(`/${f}`, data)))));
  t.fsWrite.push(await timeIt(() => Promise.all(files.map((f) => fs.promises.writeFile(path.join(plain, f), data)))));
  t.boxRead.push(await timeIt(() => Promise.all(files.map((f) => box.readFile(`/${f}`)))));
  t.fsRead.push(await timeIt(() => Promise.all(files.map((f) => fs.promises.readFile(path.join(plain, f))))));
}
const w = median(t.boxWrite) / median(t.fsWrite);
const rd = median(t.boxRead) / median(t.fsRead);
console.log(`place ${N} x 1 KiB: box.writeFile ${median(t.boxWrite).toFixed(2)} ms, fs.promises.writeFile ${median(t.fsWrite).toFixed(2)} ms, ratio ${w.toFixed(2)}x (target <= 1.3x)`);
console.log(`read  ${N} x 1 KiB: box.readFile  ${median(t.boxRead).toFixed(2)} ms, fs.promises.readFile  ${median(t.fsRead).toFixed(2)} ms, ratio ${rd.toFixed(2)}x (target <= 1.3x)`);

// provider run() of a trivial entry vs a direct exec of the same command in a running sandbox
const ENTRY = `echo '{"status":"finished","output":null}'`;
const provider = createNookSandboxProvider({ sandboxes, command: ENTRY });
const pr = [];
const ex = [];
for (let r = 0; r < Math.max(5, Math.floor(ROUNDS / 2)); r++) {
  const request = {
    runId: "bench", sandboxId: `s${r}`, input: {}, config: {}, rootDir: "/tmp", requestBundlePath: "/tmp", resultBundlePath: "/tmp",
    workflow: () => ({}), executeChildWorkflow: async () => ({}), allowNetwork: false, maxOutputBytes: 1e6, toolTimeoutMs: 60_000,
    heartbeat: () => {},
  };
  pr.push(await timeIt(async () => {
    await provider.run(request);
    await provider.cleanup(request);
  }));
  ex.push(await timeIt(() => box.exec(ENTRY)));
}
console.log(`provider run()+cleanup (create, ship request, exec, read result, remove): ${median(pr).toFixed(1)} ms; direct box.exec: ${median(ex).toFixed(2)} ms; ratio ${(median(pr) / median(ex)).toFixed(1)}x`);

await sandboxes.remove("bench");
fs.rmSync(plain, { recursive: true, force: true });
fs.rmSync(home, { recursive: true, force: true });
