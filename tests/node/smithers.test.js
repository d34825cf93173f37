// SPDX-License-Identifier: Apache-2.0
"use strict";
// nook/smithers: the provider against real sandboxes, the prop mapping, cleanup, secrets.
const { test, describe, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { PKG, HOME, nook, uniqueName, sleep, removeHome } = require("./helpers.js");
const { createNookSandboxProvider, registerNookSandboxProvider, NOOK_PROVIDER_ID, SMITHERS_NAME_LABEL, __internals } = require(
  path.join(PKG, "lib", "smithers.js"),
);
// Smithers as the package sees it (its optional peer dependency, installed in bindings/node)
const fromPkg = (id) => require(require.resolve(id, { paths: [PKG] }));
const { SmithersError } = fromPkg("@smithers-orchestrator/errors/SmithersError");
const { SandboxError, Sandboxes } = nook;

const sandboxes = new Sandboxes({ home: HOME });
const SENTINEL = `nook-sentinel-${process.pid}-a1b2c3d4e5`;

// The entry command's runner: reports what it saw; a few behaviours selected by the input.
const RUNNER = `
const fs = require("fs");
const req = JSON.parse(fs.readFileSync(process.env.SMITHERS_SANDBOX_REQUEST_PATH, "utf8"));
const mode = (req.input && req.input.mode) || "ok";
const seen = { input: req.input, flag: process.env.CONTRACT_FLAG || null, hasToken: !!process.env.API_TOKEN,
  hasReqSecret: !!process.env.REQ_SECRET, hasEgress: !!process.env.EGRESS_PASSWORD, cwd: process.cwd() };
if (mode === "fail") { process.stderr.write("boom with " + process.env.API_TOKEN + "\\n"); process.exit(2); }
if (mode === "sleep") { require("child_process").execSync("sleep 2"); }
if (mode === "hang") { require("child_process").execSync("sleep 60"); }
if (mode === "file") { fs.writeFileSync(process.env.SMITHERS_SANDBOX_RESULT_PATH, JSON.stringify({ status: "finished", output: seen })); }
else console.log(JSON.stringify({ status: "finished", output: seen }));
`;

let counter = 0;
function request(overrides = {}) {
  const heartbeats = [];
  return {
    heartbeats,
    request: {
      runId: `run${process.pid}`,
      sandboxId: `sbx${counter++}`,
      input: { hello: "world" },
      config: {},
      rootDir: "/tmp/unused",
      requestBundlePath: "/tmp/unused",
      resultBundlePath: "/tmp/unused",
      workflow: () => ({}),
      executeChildWorkflow: async () => ({}),
      allowNetwork: false,
      maxOutputBytes: 1_000_000,
      toolTimeoutMs: 60_000,
      heartbeat: (d) => heartbeats.push(d),
      ...overrides,
    },
  };
}

function provider(options = {}) {
  return createNookSandboxProvider({
    sandboxes,
    setupFiles: { "/workspace/run-smithers-sandbox.js": RUNNER },
    ...options,
  });
}

async function exists(name) {
  return (await sandboxes.list()).find((s) => s.name === name);
}

/** Rejects with a SmithersError of code (as microsandbox), and libnook's code in the cause. */
async function rejectsSmithers(promise, code, causeCode) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof SmithersError, `expected SmithersError, got ${err && err.stack}`);
    assert.equal(err.code, code, err.message);
    if (causeCode) {
      assert.ok(err.cause instanceof SandboxError, `cause: ${err.cause}`);
      assert.equal(err.cause.code, causeCode, err.message);
    }
    return true;
  });
}

after(async () => {
  await removeHome();
});

describe("prop mapping", () => {
  test("cpuLimit rounds up; memoryLimit Docker units -> MiB through libnook's parser", () => {
    assert.equal(__internals.normalizeCpuCount(1.2), 2);
    assert.equal(__internals.normalizeCpuCount("0.5"), 1);
    assert.equal(__internals.normalizeCpuCount(undefined, 3), 3);
    assert.equal(__internals.normalizeMemoryMib("512m"), 512);
    assert.equal(__internals.normalizeMemoryMib("1g"), 1024);
    assert.equal(__internals.normalizeMemoryMib("1048576k"), 1024);
    assert.equal(__internals.normalizeMemoryMib("100b"), 1);
    assert.equal(__internals.normalizeMemoryMib(300), 300);
    assert.throws(() => __internals.normalizeMemoryMib("lots"), /memoryLimit/);
    assert.throws(() => __internals.normalizeCpuCount(-1), /cpuLimit/);
  });

  test("spec from props and options, in nook's keys", () => {
    const { request: req } = request({
      allowNetwork: true,
      config: {
        image: "host",
        cpuLimit: 1.5,
        memoryLimit: "2g",
        ports: [{ host: 8080, container: 80 }],
        volumes: [{ host: "/srv/data", container: "/data" }],
        workspace: { idleTimeoutSecs: 30, persistence: "sticky", name: "ws" },
      },
    });
    const spec = __internals.buildSpec(
      { labels: { a: "b" }, maxDurationSecs: 600, security: "restricted", maxCpus: 4 },
      req,
      { config: req.config, workspace: req.config.workspace, workdir: "/workspace", ephemeral: false, smithersName: "ws" },
    );
    assert.deepEqual(spec, {
      image: "host",
      cpus: 2,
      maxCpus: 4,
      memoryMib: 2048,
      persistence: "sticky",
      security: "restricted",
      labels: { a: "b", [SMITHERS_NAME_LABEL]: "ws" },
      maxDurationSecs: 600,
      idleTimeoutSecs: 30,
      network: "public",
      ports: ["8080:80"],
      volumes: [{ type: "bind", source: "/srv/data", target: "/data", readonly: true }],
    });
  });

  test("allowNetwork with egress proxies by address: one allow rule per proxy host:port, nothing else", () => {
    const egress = {
      httpProxy: "http://user:secret@10.99.0.10:3128",
      httpsProxy: "http://[fd00::5]:3129",
    };
    assert.deepEqual(__internals.egressProxyRules(egress), [
      { action: "allow", cidr: "10.99.0.10/32", ports: "3128" },
      { action: "allow", cidr: "fd00::5/128", ports: "3129" },
    ]);
    assert.deepEqual(__internals.egressProxyRules({ httpProxy: "http://10.0.0.7", httpsProxy: "http://10.0.0.7:80" }), [
      { action: "allow", cidr: "10.0.0.7/32", ports: "80" },
    ]);
    assert.deepEqual(__internals.egressProxyRules({ httpProxy: "http://proxy.internal:3128" }), [], "a name gets no rule");
    assert.deepEqual(__internals.egressProxyRules(undefined), []);
    assert.throws(() => __internals.egressProxyRules({ httpProxy: "not a url secret" }), (err) => {
      assert.ok(err instanceof SmithersError);
      assert.equal(err.code, "INVALID_INPUT");
      assert.doesNotMatch(err.message, /secret/);
      return true;
    });
    const { request: req } = request({ allowNetwork: true, egress });
    const spec = __internals.buildSpec({}, req, { config: {}, workdir: "/workspace", ephemeral: true, smithersName: "x" });
    assert.equal(spec.network, "public");
    assert.deepEqual(spec.networkPolicy.rules.map((r) => r.cidr), ["10.99.0.10/32", "fd00::5/128"]);
    const { request: off } = request({ allowNetwork: false, egress });
    assert.equal(__internals.buildSpec({}, off, { config: {}, workdir: "/workspace", ephemeral: true, smithersName: "x" }).networkPolicy, undefined);
  });

  test("secrets and egress options go into the spec as they are (egress.ca as caPem)", () => {
    const secrets = { GH_TOKEN: { value: "v", hosts: ["api.github.com"] } };
    const { request: req } = request({ allowNetwork: true });
    const spec = __internals.buildSpec(
      { secrets, egress: { allowHttp: ["GET https://api.github.com/*"], ca: "PEM", audit: true } },
      req,
      { config: {}, workdir: "/workspace", ephemeral: true, smithersName: "x" },
    );
    assert.deepEqual(spec.secrets, secrets);
    assert.deepEqual(spec.egress, { allowHttp: ["GET https://api.github.com/*"], audit: true, caPem: "PEM" });
    assert.equal(spec.network, "public");
  });

  test("secrets without allowNetwork: libnook refuses them, naming the network, and never echoes the value", async () => {
    const { request: off } = request({ allowNetwork: false });
    const spec = __internals.buildSpec(
      { secrets: { T: { value: "nook-sentinel-smithers", hosts: ["a.example"] } } },
      off,
      { config: {}, workdir: "/workspace", ephemeral: true, smithersName: "x" },
    );
    await assert.rejects(sandboxes.create(uniqueName("secretoff"), spec), (err) => {
      assert.ok(err instanceof SandboxError, String(err));
      assert.equal(err.code, "invalid");
      assert.match(err.message, /network/);
      assert.doesNotMatch(err.message, /nook-sentinel-smithers/);
      return true;
    });
  });

  test("libnook takes the proxy rules with network public (real create)", async () => {
    const name = uniqueName("proxyrule");
    const spec = { network: "public", networkPolicy: __internals.egressProxyRules({ httpProxy: "http://10.99.0.10:3128", httpsProxy: "http://[fd00::5]:3129" }) };
    spec.networkPolicy = { rules: spec.networkPolicy };
    try {
      await sandboxes.create(name, spec);
    } catch (err) {
      // a machine without public networking may refuse the network, never the rules
      assert.ok(err instanceof SandboxError, String(err));
      assert.notEqual(err.code, "invalid", err.message);
      return;
    }
    const info = await exists(name);
    assert.equal(info.spec.network, "public");
    assert.equal(info.spec.networkPolicy.rules.length, 2);
    await sandboxes.remove(name);
  });

  test("names are valid nook names", () => {
    assert.equal(__internals.sanitizeSandboxName("smithers-run-1-sbx"), "smithers-run-1-sbx");
    const n = __internals.sanitizeSandboxName("Smithers Run/ID".repeat(10));
    assert.match(n, /^[a-z0-9][a-z0-9_.-]{0,62}$/);
  });

  test("Smithers names keep case and up to 128 bytes (as microsandbox); distinct ones map to distinct nook names", () => {
    const long = "Run-ABC.".repeat(16); // 128 bytes, valid as it is
    assert.equal(__internals.smithersSandboxName(long), long);
    assert.equal(__internals.smithersSandboxName("MyBox"), "MyBox");
    const longer = __internals.smithersSandboxName("X".repeat(300));
    assert.equal(Buffer.byteLength(longer), 128);
    assert.notEqual(__internals.sanitizeSandboxName("MyBox"), __internals.sanitizeSandboxName("mybox"));
    assert.notEqual(__internals.sanitizeSandboxName(long), __internals.sanitizeSandboxName(long.slice(0, 120)));
    const { request: req } = request({ config: { workspace: { name: "Team Space", persistence: "sticky" } } });
    const r = __internals.resolveSandboxName(undefined, req.config.workspace, req);
    assert.match(r.name, /^[a-z0-9][a-z0-9_.-]{0,62}$/);
    assert.match(r.smithersName, /^Team-Space-[0-9a-f]{10}$/);
  });

  test("secret-looking keys and egress values go as secretEnv", () => {
    const { plain, secret } = __internals.splitSecretEnv(
      { PATH_X: "1", API_TOKEN: "t", HTTPS_PROXY: "http://u:p@h", CUSTOM: "c" },
      { env: { CUSTOM: "c" }, httpsProxy: "http://u:p@h" },
    );
    assert.deepEqual(plain, { PATH_X: "1" });
    assert.deepEqual(Object.keys(secret).sort(), ["API_TOKEN", "CUSTOM", "HTTPS_PROXY"]);
  });
});

describe("provider", () => {
  test("id and a full run in a real sandbox", async () => {
    const p = provider({ env: { CONTRACT_FLAG: "on" } });
    assert.equal(p.id, NOOK_PROVIDER_ID);
    const { request: req, heartbeats } = request();
    const res = await p.run(req);
    assert.equal(res.status, "finished");
    assert.deepEqual(res.output.input, { hello: "world" });
    assert.equal(res.output.flag, "on");
    assert.equal(res.output.cwd, "/workspace");
    const name = `smithers-${req.runId}-${req.sandboxId}`.toLowerCase();
    assert.equal(res.remoteRunId, name);
    assert.equal(res.workspaceId, name);
    assert.equal(res.containerId, name);
    assert.deepEqual(
      heartbeats.map((h) => h.stage),
      ["nook-session-created", "nook-request-shipped", "nook-result-read"],
    );
    assert.ok(await exists(name));
    await p.cleanup(req);
    assert.equal(await exists(name), undefined, "destroy removes an ephemeral sandbox");
    await p.cleanup(req); // idempotent
  });

  test("the result may come from the result path", async () => {
    const p = provider();
    const { request: req } = request({ input: { mode: "file" } });
    const res = await p.run(req);
    assert.equal(res.status, "finished");
    assert.equal(res.output.input.mode, "file");
    await p.cleanup(req);
  });

  test("factory command wins over <Sandbox command>, which wins over the default", async () => {
    const a = provider({ command: "echo '{\"status\":\"finished\",\"output\":\"factory\"}'" });
    const { request: r1 } = request({ config: { command: "echo '{\"status\":\"finished\",\"output\":\"prop\"}'" } });
    assert.equal((await a.run(r1)).output, "factory");
    await a.cleanup(r1);
    const b = provider();
    const { request: r2 } = request({ config: { command: "echo '{\"status\":\"failed\",\"output\":\"prop\"}'" } });
    const res = await b.run(r2);
    assert.equal(res.status, "failed");
    assert.equal(res.output, "prop");
    await b.cleanup(r2);
  });

  test("workdir outside /workspace is created after boot", async () => {
    const p = provider({ workdir: "/work/smithers", command: "pwd; echo '{\"status\":\"finished\"}' > \"$SMITHERS_SANDBOX_RESULT_PATH\"" });
    const { request: req } = request();
    const res = await p.run(req);
    assert.equal(res.status, "finished");
    await p.cleanup(req);
  });

  test("cleanup keep leaves the sandbox running and not ephemeral, its Smithers name (case kept) in a label", async () => {
    const p = provider({ cleanup: "keep", idleTimeoutSecs: 120, sandboxName: `Keep-Me-${process.pid}` });
    const { request: req } = request();
    const res = await p.run(req);
    await p.cleanup(req);
    const info = await exists(res.remoteRunId);
    assert.equal(info.state, "running");
    assert.equal(info.persistence, "sticky");
    assert.equal(info.spec.idleTimeoutSecs, 120);
    assert.equal(info.labels[SMITHERS_NAME_LABEL], `Keep-Me-${process.pid}`);
    await sandboxes.remove(res.remoteRunId);
  });

  test("sticky workspace: stopped but kept, reopened by name with /etc intact", async () => {
    const wsName = uniqueName("sticky");
    const p = provider({ command: "cat /etc/nook-sticky 2>/dev/null || echo none > /etc/nook-sticky; echo '{\"status\":\"finished\",\"output\":\"'$(cat /etc/nook-sticky)'\"}'" });
    const config = { workspace: { name: wsName, persistence: "sticky" } };
    const { request: r1 } = request({ config });
    assert.equal((await p.run(r1)).output, "none");
    await p.cleanup(r1);
    const info = await exists(wsName);
    assert.equal(info.state, "stopped");
    assert.equal(info.persistence, "sticky");
    const p2 = provider({ command: "echo '{\"status\":\"finished\",\"output\":\"'$(cat /etc/nook-sticky)'\"}'" });
    const { request: r2 } = request({ config });
    assert.equal((await p2.run(r2)).output, "none", "the file written to /etc in run 1 is there in run 2");
    await p2.cleanup(r2);
    await sandboxes.remove(wsName);
  });

  test("ports without allowNetwork: SmithersError INVALID_INPUT (as microsandbox), nothing created", async () => {
    const { request: req } = request({ config: { ports: [{ host: 18080, container: 80 }] } });
    const before = (await sandboxes.list()).length;
    await rejectsSmithers(provider().run(req), "INVALID_INPUT");
    assert.equal((await sandboxes.list()).length, before);
  });

  test("allowNetwork maps to network public: libnook decides (missing_feature today)", async () => {
    const { request: req } = request({ allowNetwork: true });
    const p = provider();
    try {
      const res = await p.run(req);
      assert.equal(res.status, "finished");
      await p.cleanup(req);
    } catch (err) {
      assert.ok(err instanceof SmithersError, String(err));
      assert.equal(err.code, "SANDBOX_EXECUTION_FAILED", err.message);
      assert.equal(err.cause.code, "missing_feature", err.message);
    }
  });

  for (const [what, options, config] of [
    ["snapshot", { snapshot: "no-such-snapshot" }, {}],
    ["workspace.snapshotId", {}, { workspace: { snapshotId: "no-such-snapshot" } }],
  ]) {
    test(`${what} of a snapshot that is not there: SANDBOX_EXECUTION_FAILED, nook's not_found as the cause`, async () => {
      const { request: req } = request({ config });
      await rejectsSmithers(provider(options).run(req), "SANDBOX_EXECUTION_FAILED", "not_found");
    });
  }

  describe("booting from a real snapshot", () => {
    const SRC = uniqueName("snapsrc");
    const SNAP = uniqueName("snap");
    // reads a file the snapshot's root layer holds, and one its workspace holds
    const SNAP_RUNNER = `
const fs = require("fs");
const read = (p) => { try { return fs.readFileSync(p, "utf8").trim(); } catch { return null; } };
console.log(JSON.stringify({ status: "finished", output: { root: read("/etc/nook-snap-marker"),
  ws: read("/workspace/snap-ws.txt"), host: require("os").hostname() } }));
`;
    let made = false;
    async function ensureSnapshot() {
      if (made) return;
      const s = await sandboxes.create(SRC, { persistence: "sticky" });
      assert.equal((await s.exec("echo root-from-snapshot > /etc/nook-snap-marker")).exitCode, 0);
      await s.writeFile("/snap-ws.txt", "ws-from-snapshot\n");
      await s.stop();
      await s.snapshot(SNAP, { withWorkspace: true });
      made = true;
    }
    after(async () => {
      if (made) {
        for (const sb of await sandboxes.list()) if (sb.spec && sb.spec.snapshot === SNAP) await sandboxes.remove(sb.name);
        await sandboxes.removeSnapshot(SNAP).catch(() => undefined);
        await sandboxes.remove(SRC).catch(() => undefined);
      }
    });

    for (const [what, options, config] of [
      ["snapshot", () => ({ snapshot: SNAP }), () => ({})],
      ["workspace.snapshotId", () => ({}), () => ({ workspace: { snapshotId: SNAP } })],
    ]) {
      test(`${what}: the entry command sees the snapshot's root layer and workspace`, async () => {
        await ensureSnapshot();
        const p = provider({ ...options(), setupFiles: { "/workspace/run-smithers-sandbox.js": SNAP_RUNNER } });
        const { request: req } = request({ config: config() });
        const res = await p.run(req);
        try {
          assert.equal(res.status, "finished", JSON.stringify(res));
          assert.equal(res.output.root, "root-from-snapshot");
          assert.equal(res.output.ws, "ws-from-snapshot");
          assert.equal(res.output.host, res.remoteRunId);
        } finally {
          await p.cleanup(req);
        }
      });
    }
  });

  describe("branchFrom: a <Sandbox> from a branch of a kept sandbox", () => {
    const SRC = uniqueName("brsrc");
    const BR_RUNNER = `
const fs = require("fs");
const read = (p) => { try { return fs.readFileSync(p, "utf8").trim(); } catch { return null; } };
console.log(JSON.stringify({ status: "finished", output: { root: read("/etc/nook-branch-marker"),
  ws: read("/workspace/branch-ws.txt") } }));
`;
    let made = false;
    async function ensureSource() {
      if (made) return;
      const s = await sandboxes.create(SRC, { persistence: "sticky" });
      assert.equal((await s.exec("echo root-from-source > /etc/nook-branch-marker")).exitCode, 0);
      await s.writeFile("/branch-ws.txt", "ws-from-source\n");
      await s.stop(); // kept; a stopped source branches on every host
      made = true;
    }
    after(async () => {
      if (made) await sandboxes.remove(SRC).catch(() => undefined);
    });

    for (const [what, options, config] of [
      ["branchFrom option", () => ({ branchFrom: SRC }), () => ({})],
      ["config.branchFrom", () => ({}), () => ({ branchFrom: SRC })],
    ]) {
      test(`${what}: the entry sees the source's root layer and workspace; the source is untouched`, async () => {
        await ensureSource();
        const p = provider({ ...options(), setupFiles: { "/workspace/run-smithers-sandbox.js": BR_RUNNER } });
        const { request: req } = request({ config: config() });
        const res = await p.run(req);
        try {
          assert.equal(res.status, "finished", JSON.stringify(res));
          assert.equal(res.output.root, "root-from-source");
          assert.equal(res.output.ws, "ws-from-source");
          assert.equal((await sandboxes.get(SRC)).exists("/run-smithers-sandbox.js"), false);
        } finally {
          await p.cleanup(req);
        }
      });
    }

    test("branchFrom a missing sandbox: SANDBOX_EXECUTION_FAILED with nook's not_found", async () => {
      const { request: req } = request({ config: { branchFrom: uniqueName("nosrc") } });
      await rejectsSmithers(provider().run(req), "SANDBOX_EXECUTION_FAILED", "not_found");
    });

    test("branchFrom must be a name: INVALID_INPUT", () => {
      assert.throws(() => provider({ branchFrom: "" }), (err) => err instanceof SmithersError && err.code === "INVALID_INPUT");
    });
  });

  test("a bad pullPolicy fails with nook's invalid", async () => {
    const { request: req } = request({ config: {} });
    await rejectsSmithers(provider({ pullPolicy: "sometimes" }).run(req), "SANDBOX_EXECUTION_FAILED", "invalid");
  });

  for (const [what, config] of [
    ["cpuLimit", { cpuLimit: 1.5 }],
    ["memoryLimit", { memoryLimit: "256m" }],
    ["volumes", { volumes: [{ host: "/nonexistent-nook-vol", container: "/data" }] }],
  ]) {
    test(`${what} reaches libnook's spec (its answer is the one we give)`, async () => {
      let seen;
      const p = provider({ configure: (spec) => void (seen = { ...spec }) });
      const { request: req } = request({ config });
      try {
        await p.run(req);
        await p.cleanup(req);
      } catch (err) {
        assert.ok(err instanceof SmithersError && err.cause instanceof SandboxError, String(err && err.stack));
      }
      assert.ok(seen);
      if (what === "cpuLimit") assert.equal(seen.cpus, 2);
      if (what === "memoryLimit") assert.equal(seen.memoryMib, 256);
      if (what === "volumes") assert.equal(seen.volumes[0].source, "/nonexistent-nook-vol");
    });
  }

  test("setupFiles outside /workspace go to libnook's spec", async () => {
    const p = provider({
      setupFiles: { "/workspace/run-smithers-sandbox.js": RUNNER, "/opt/tool/conf.json": "{}" },
      configure: (spec) => {
        assert.deepEqual(spec.setupFiles, { "/opt/tool/conf.json": "{}" });
      },
    });
    const { request: req } = request();
    try {
      assert.equal((await p.run(req)).status, "finished");
      await p.cleanup(req);
    } catch (err) {
      assert.ok(err instanceof SmithersError && err.cause instanceof SandboxError, String(err && err.stack));
    }
  });

  test("a failing entry is SANDBOX_EXECUTION_FAILED with secrets scrubbed", async () => {
    const p = provider({ env: { API_TOKEN: SENTINEL } });
    const { request: req } = request({ input: { mode: "fail" } });
    await assert.rejects(p.run(req), (err) => {
      assert.equal(err.code, "SANDBOX_EXECUTION_FAILED");
      assert.ok(!err.message.includes(SENTINEL), err.message);
      assert.match(err.message, /\[redacted\]/);
      return true;
    });
    await p.cleanup(req);
  });

  test("request.signal aborts the entry and kills it", async () => {
    const p = provider();
    const ac = new AbortController();
    const { request: req } = request({ input: { mode: "hang" }, signal: ac.signal });
    const t0 = Date.now();
    setTimeout(() => ac.abort(), 1000);
    await assert.rejects(p.run(req), /abort/i);
    assert.ok(Date.now() - t0 < 15000, `took ${Date.now() - t0} ms`);
    await p.cleanup(req);
  });

  test("registerNookSandboxProvider registers in Smithers' registry, under Node too", () => {
    const { resolveSandboxProvider } = fromPkg("@smithers-orchestrator/sandbox/execute");
    const id = `nook-reg-${process.pid}`;
    const unregister = registerNookSandboxProvider({ sandboxes, id });
    assert.equal(typeof unregister, "function");
    assert.equal(resolveSandboxProvider(id).id, id);
    unregister();
    assert.throws(() => resolveSandboxProvider(id), /not registered/);
  });
});

describe("secrets", () => {
  test("a sentinel secret never lands in nook's state, logs or host argv", async () => {
    const p = provider({ env: { API_TOKEN: SENTINEL, CONTRACT_FLAG: "on" }, cleanup: "keep" });
    const { request: req } = request({
      input: { mode: "sleep" },
      config: { env: { REQ_SECRET: SENTINEL } },
      egress: { env: { EGRESS_PASSWORD: SENTINEL } },
    });
    const cmdlineHits = [];
    let running = true;
    const scan = (async () => {
      while (running) {
        for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
          try {
            if (fs.readFileSync(`/proc/${pid}/cmdline`).includes(SENTINEL)) cmdlineHits.push(pid);
          } catch {
            // gone
          }
        }
        await sleep(50);
      }
    })();
    const res = await p.run(req);
    running = false;
    await scan;
    assert.equal(res.output.hasToken, true);
    assert.equal(res.output.hasReqSecret, true);
    assert.equal(res.output.hasEgress, true);
    assert.deepEqual(cmdlineHits, [], "no host process had the secret in its argv");
    // nook's state: database, sandbox state folders, supervisor logs, config.  Not the workspace:
    // it is the guest's own, and Smithers' kit ships request.config (with its env) there as is.
    const hits = [];
    const walk = (dir) => {
      let entries;
      try {
        entries = fs.readdirSync(dir, { withFileTypes: true });
      } catch (err) {
        // overlayfs leaves its private work/work at mode 0: nothing of ours can be in there
        if (err.code === "EACCES" && path.basename(dir) === "work") return;
        throw err;
      }
      for (const e of entries) {
        const p2 = path.join(dir, e.name);
        if (e.isDirectory()) {
          if (p2 === path.join(HOME, "sandboxes", res.remoteRunId, "upper")) continue; // guest root layer
          if (p2 === path.join(HOME, "workspaces")) continue;
          walk(p2);
        } else if (e.isFile()) {
          try {
            if (fs.readFileSync(p2).includes(SENTINEL)) hits.push(p2);
          } catch {
            // sockets, races
          }
        }
      }
    };
    walk(HOME);
    assert.deepEqual(hits, [], `the sentinel leaked into ${hits.join(", ")}`);
    const info = await exists(res.remoteRunId);
    assert.ok(!JSON.stringify(info).includes(SENTINEL));
    await sandboxes.remove(res.remoteRunId);
  });
});
