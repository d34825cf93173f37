// SPDX-License-Identifier: Apache-2.0
"use strict";
// A real Smithers workflow: `smithers up parent.tsx` (smithers-orchestrator@0.32.0, its CLI under
// Bun) whose <Sandbox provider={createNookSandboxProvider(...)}> runs child.tsx inside a nook
// sandbox.  The child's output must come from inside: its hostname is the sandbox's name and it
// sees the request file Smithers' kit shipped into /workspace.
//   NOOK_WORKFLOW_DIR: the directory with node_modules (run.sh: this one, or its copy under
//   the build dir); NOOK_NODE_ADDON as for the other tests.
const { test } = require("node:test");
const assert = require("node:assert/strict");
const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const DIR = process.env.NOOK_WORKFLOW_DIR || __dirname;
const PKG = path.resolve(__dirname, "..", "..", "..", "bindings", "node");
const BUN = path.join(DIR, "node_modules", ".bin", "bun");
const SMITHERS = path.join(DIR, "node_modules", ".bin", "smithers");

test("a Smithers workflow runs its child workflow inside nook and finishes", { timeout: 180_000 }, async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "nook-node-workflow-"));
  const home = path.join(tmp, "nook");
  const name = `wf-${process.pid}`;
  try {
    const res = spawnSync(
      BUN,
      [SMITHERS, "up", path.join(DIR, "parent.tsx"), "--input", JSON.stringify({ prompt: "hello nook" }),
        "--format", "json", "--no-monitor", "--no-post-failure", "--no-report"],
      {
        cwd: tmp, // smithers.db and .smithers/ of the parent run
        env: { ...process.env, HOME: tmp, NOOK_HOME: home, NOOK_WF_SANDBOX: name, NOOK_NODE_PKG: PKG },
        encoding: "utf8",
        timeout: 170_000,
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    const diag = `exit ${res.status} ${res.signal ?? ""}\nstdout:\n${res.stdout}\nstderr:\n${String(res.stderr).slice(-4000)}`;
    assert.equal(res.status, 0, diag);
    const out = JSON.parse(res.stdout);
    assert.equal(out.status, "finished", diag);
    const rows = [].concat(out.output);
    assert.equal(rows.length, 1, diag);
    const row = rows[0];
    assert.equal(row.nodeId, "in-nook");
    assert.equal(row.host, name, "the child ran with the sandbox's hostname");
    assert.equal(row.sawRequest, true, "the child saw the request file in the sandbox's /workspace");
    assert.equal(row.cwd, "/workspace");
    assert.equal(row.prompt, "child saw: hello nook");
    // cleanup "destroy" removed the ephemeral sandbox
    const { Sandboxes } = require(PKG);
    assert.deepEqual((await new Sandboxes({ home }).list()).map((s) => s.name), []);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
