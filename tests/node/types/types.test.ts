// SPDX-License-Identifier: Apache-2.0
// The package's types against its runtime: this file compiles under tsc --strict (what the
// types accept), and runs (node --test, compiled by tests/node/run.sh): every call marked with
// a ts-expect-error comment is one the runtime rejects, and the test checks that it does.  If the .d.ts
// and the runtime drift apart, either tsc or this test fails.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Sandboxes, SandboxError, Box, parseSize, parseDuration, version } from "nook-sandbox";
import type { SandboxSpec, SandboxInfo, ExecResult, VolumeSpec, SnapshotInfo, EgressInfo } from "nook-sandbox";
import type { DiffResult, MergeResult, SandboxErrorCode } from "nook-sandbox";
import type { EgressLogEntry } from "nook-sandbox";
import { createNookSandboxProvider, NOOK_PROVIDER_ID } from "nook-sandbox/smithers";
import type { NookSandboxProviderOptions } from "nook-sandbox/smithers";

const home = mkdtempSync(join(tmpdir(), "nook-types-"));
const sandboxes = new Sandboxes({ home });
let seq = 0;
const name = (): string => `types-${process.pid}-${seq++}`;

after(async () => {
  for (const sb of await sandboxes.list()) await sandboxes.remove(sb.name);
  rmSync(home, { recursive: true, force: true });
});

/** A create the runtime must refuse with SandboxError invalid, leaving nothing behind. */
async function refused(create: () => Promise<unknown>, what: RegExp): Promise<void> {
  const before = (await sandboxes.list()).length;
  await assert.rejects(create, (err: unknown) => {
    assert.ok(err instanceof SandboxError, String(err));
    assert.equal(err.code, "invalid", err.message);
    assert.match(err.message, what);
    return true;
  });
  assert.equal((await sandboxes.list()).length, before);
}

test("what the types accept, the runtime runs: spec, exec, inspect (imageDigest)", async () => {
  const spec: SandboxSpec = {
    image: "host",
    env: { GREETING: "hi" },
    labels: { team: "a" },
    persistence: "ephemeral",
    security: "default",
    network: "off",
    pullPolicy: "if-missing",
    maxDurationSecs: 600,
    setupFiles: { "/etc/nook-types-a": "text", "/etc/nook-types-b": { base64: "Ynl0ZXM=", mode: 0o600 } },
  };
  const box = await sandboxes.create(name(), spec);
  const res: ExecResult = await box.exec("echo $GREETING; cat /etc/nook-types-a /etc/nook-types-b");
  assert.equal(res.stdout, "hi\ntextbytes");
  assert.equal(res.exitCode, 0);
  const info: SandboxInfo = await box.inspect();
  assert.equal(info.imageDigest, null);
  assert.equal(info.stoppedAt, null);
  assert.equal(typeof info.supervisorPid, "number");
  assert.equal(info.labels.team, "a");
  // no secret, HTTP rule or audit: no gateway, so no egress state
  const egress: EgressInfo | undefined = info.egress;
  assert.equal(egress, undefined);
  await sandboxes.remove(box.name);
});

test("resource, port and volume shapes the types accept pass libnook's parser", () => {
  // type-level: these compile (cpus/memoryMib as numbers or strings, ports as strings,
  // volumes as {type, source, target}); the runtime ones are checked in the tests below
  const ports: SandboxSpec["ports"] = ["18091:80", "127.0.0.1:18092:81/tcp"];
  const volumes: VolumeSpec[] = [
    { source: "/srv", target: "/data" },
    { type: "tmpfs", target: "/scratch", sizeMib: 8 },
    { type: "volume", name: "cache", target: "/cache", readonly: false },
  ];
  const limits: SandboxSpec = { cpus: 1, maxCpus: "2", memoryMib: 256, maxMemoryMib: "1g", pidsMax: 64 };
  assert.equal(ports.length + volumes.length, 5);
  assert.equal(limits.cpus, 1);
  assert.equal(parseSize("1k"), 1024);
  assert.equal(parseDuration("1s"), 1000);
  assert.equal(typeof version(), "string");
});

test("what the types reject, the runtime refuses", async () => {
  // ports are "HOST:CONTAINER" strings, not objects
  // @ts-expect-error
  await refused(() => sandboxes.create(name(), { network: "public", ports: [{ host: 18091, container: 80 }] }), /ports\[0\]/);
  // volumes are {type, source, target}, not {host, container}
  // @ts-expect-error
  await refused(() => sandboxes.create(name(), { volumes: [{ host: "/srv", container: "/data" }] }), /volumes\[0\]/);
  // @ts-expect-error unknown field
  await refused(() => sandboxes.create(name(), { memoryLimit: "1g" }), /unknown field 'memoryLimit'/);
  // @ts-expect-error
  await refused(() => sandboxes.create(name(), { persistence: "forever" }), /persistence/);
  // @ts-expect-error
  await refused(() => sandboxes.create(name(), { network: "on" }), /network/);
  // @ts-expect-error
  await refused(() => sandboxes.create(name(), { pullPolicy: "sometimes" }), /pullPolicy/);
  // @ts-expect-error
  await refused(() => sandboxes.create(name(), { security: "strict" }), /security/);
  // @ts-expect-error a spec is an object
  await refused(() => sandboxes.create(name(), "host"), /spec/);
  // @ts-expect-error options are checked: a typo is no "off"
  await refused(() => sandboxes.create(name(), {}, { replce: true }), /unknown option 'replce'/);
  // @ts-expect-error
  await refused(() => sandboxes.stop(name(), { timeout: 5 }), /did you mean 'timeoutMs'/);
  // @ts-expect-error a Box comes from Sandboxes
  assert.throws(() => new Box(), (err: unknown) => err instanceof SandboxError && err.code === "invalid");
});

test("exec's argument types match what it refuses", async () => {
  const box = await sandboxes.create(name());
  // @ts-expect-error a command is a string or an argv array
  await assert.rejects(() => box.exec(42), (err: unknown) => err instanceof SandboxError && err.code === "invalid");
  // @ts-expect-error env values are strings
  await assert.rejects(() => box.exec("true", { env: { N: 1 } }), (err: unknown) => err instanceof SandboxError && err.code === "invalid");
  // @ts-expect-error
  await assert.rejects(() => box.writeFile("/x", 5), (err: unknown) => err instanceof SandboxError && err.code === "invalid");
  const snaps: SnapshotInfo[] = await sandboxes.snapshots();
  assert.deepEqual(snaps, []);
  await sandboxes.remove(box.name);
});

test("pause, resume and branch are typed", async () => {
  const src = await sandboxes.create(name(), { persistence: "sticky" });
  await src.stop();
  const one: Box = await sandboxes.branch(src.name, name());
  const many: Box[] = await sandboxes.branch(src.name, name(), { count: 2 });
  assert.equal(many.length, 2);
  const info: SandboxInfo = await one.inspect();
  const from: string | null = info.branchOf;
  assert.equal(from, src.name);
  // not a branch: null, as the type says (it said "absent", and the value was null)
  const srcInfo: SandboxInfo = await (await sandboxes.get(src.name)).inspect();
  assert.equal(srcInfo.branchOf, null);
  assert.equal(srcInfo.branchPoint, null);
  const p: Promise<void> = one.pause();
  await p.catch(() => undefined); // stopped: SandboxError state
  // @ts-expect-error count is a number
  await assert.rejects(() => sandboxes.branch(src.name, name(), { count: "2" }), (err: unknown) => err instanceof SandboxError && err.code === "invalid");
  for (const b of [one, ...many, src]) await sandboxes.remove(b.name);
});

test("the Smithers provider's option types match what it refuses", () => {
  const ok: NookSandboxProviderOptions = { sandboxes, cpus: 2, memoryMib: 512, cleanup: "keep", pullPolicy: "never", scripts: { a: "b" } };
  assert.equal(createNookSandboxProvider(ok).id, NOOK_PROVIDER_ID);
  const smithersInvalid = (err: unknown) => (err as { code?: string }).code === "INVALID_INPUT";
  // @ts-expect-error
  assert.throws(() => createNookSandboxProvider({ sandboxes, cleanup: "never" }), smithersInvalid);
  // @ts-expect-error cpus is a whole number
  assert.throws(() => createNookSandboxProvider({ sandboxes, cpus: "2" }), smithersInvalid);
  // @ts-expect-error workdir is a guest path
  assert.throws(() => createNookSandboxProvider({ sandboxes, workdir: 5 }), smithersInvalid);
});

test("diff and merge types match what the runtime returns and refuses", async () => {
  const a = await sandboxes.create(name());
  const b = await sandboxes.create(name());
  await b.exec("echo x > /workspace/new-file");
  const d: DiffResult = await b.diff({ patch: true });
  assert.equal(d.changes[0]?.kind, "added");
  const m: MergeResult = await b.merge({ into: a.name, strategy: "refuse", dryRun: true });
  assert.equal(m.dryRun, true);
  // @ts-expect-error the strategy is one of three
  await assert.rejects(() => b.merge({ into: a.name, strategy: "mine" }), (err: unknown) => err instanceof SandboxError && err.code === "invalid");
  const code: SandboxErrorCode = "conflict";
  assert.equal(code, "conflict");
  await sandboxes.remove(a.name);
  await sandboxes.remove(b.name);
});

test("egress shapes: secrets and egress reach libnook's parser; egressLog is an array", async () => {
  const spec: SandboxSpec = {
    network: "off",
    secrets: { GH_TOKEN: { value: "v", hosts: ["api.github.com", "*.example.com"], body: false } },
    egress: { allowHttp: ["GET https://api.github.com/repos/*"], audit: true },
  };
  // the shape is right; with the network off libnook refuses it, naming the network
  await assert.rejects(sandboxes.create(name(), spec), (e: unknown) =>
    e instanceof SandboxError && e.code === "invalid" && /network/.test(e.message));
  // @ts-expect-error a secret needs hosts
  const noHosts: SandboxSpec = { network: "public", secrets: { T: { value: "v" } } };
  await assert.rejects(sandboxes.create(name(), noHosts), (e: unknown) =>
    e instanceof SandboxError && e.code === "invalid" && /hosts/.test(e.message));
  const box = await sandboxes.create(name(), { network: "off" });
  const log: EgressLogEntry[] = await box.egressLog();
  assert.deepEqual(log, []);
  await sandboxes.remove(box.name);
});
