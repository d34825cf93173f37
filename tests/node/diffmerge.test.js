// SPDX-License-Identifier: Apache-2.0
"use strict";
// box.diff() and box.merge() against the real addon and real sandboxes: two sandboxes made from
// the same initial workspace, the branch's changes diffed and merged, a conflict refused with
// SandboxError "conflict" and .conflicts, ours/theirs, bad options refused.
const { test, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { HOME, nook, uniqueName, removeHome } = require("./helpers.js");
const { Sandboxes, SandboxError } = nook;

const sandboxes = new Sandboxes({ home: HOME });
const made = [];

after(async () => {
  for (const n of made) await sandboxes.remove(n).catch(() => {});
  await removeHome(); // its NOOK_HOME (helpers.js) and runtime folder, as every other test file
});

async function fromSeed(name) {
  await sandboxes.list(); // the state database exists before a workspace is staged by hand
  const dir = sandboxes.workspaceDir(name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "shared"), "base\n");
  fs.writeFileSync(path.join(dir, "gone"), "x\n");
  made.push(name);
  return sandboxes.create(name, { image: "host" });
}

test("diff lists a guest's changes; merge applies them; conflicts refuse", async () => {
  const target = await fromSeed(uniqueName("dm-t"));
  const branch = await fromSeed(uniqueName("dm-b"));
  assert.deepEqual((await branch.diff()).changes, []);
  await branch.exec("cd /workspace && echo new > added && rm gone && echo b > shared");
  const d = await branch.diff({ patch: true });
  assert.deepEqual(d.changes.map((c) => [c.kind, c.path]), [["added", "added"], ["deleted", "gone"], ["modified", "shared"]]);
  assert.deepEqual(d.summary, { added: 1, deleted: 1, modified: 1, type: 0, mode: 0 });
  assert.match(d.changes[0].patch, /\+new/);
  assert.equal(d.scope, "workspace");

  await target.exec("echo t > /workspace/shared");
  await assert.rejects(branch.merge({ into: target.name }), (err) => {
    assert.ok(err instanceof SandboxError);
    assert.equal(err.code, "conflict", err.message);
    assert.deepEqual(err.conflicts, [{ path: "shared", branch: "modified", target: "modified", resolution: "refused" }]);
    return true;
  });
  assert.ok(fs.existsSync(path.join(target.workspaceDir, "gone")), "a refused merge changes nothing");

  const dry = await branch.merge({ into: target.name, strategy: "ours", dryRun: true });
  assert.equal(dry.merged, false);
  assert.ok(fs.existsSync(path.join(target.workspaceDir, "gone")), "a dry run changes nothing");
  const r = await branch.merge({ into: target.name, strategy: "theirs" });
  assert.equal(r.merged, true);
  assert.equal(r.into, target.name);
  assert.equal(fs.readFileSync(path.join(target.workspaceDir, "shared"), "utf8"), "b\n");
  assert.equal(fs.readFileSync(path.join(target.workspaceDir, "added"), "utf8"), "new\n");
  assert.ok(!fs.existsSync(path.join(target.workspaceDir, "gone")));
});

test("bad diff and merge options are invalid", async () => {
  const box = await fromSeed(uniqueName("dm-x"));
  await assert.rejects(box.diff(null), (e) => e instanceof SandboxError && e.code === "invalid");
  await assert.rejects(box.merge({}), (e) => e instanceof SandboxError && e.code === "invalid" && /into/.test(e.message));
  await assert.rejects(box.merge({ into: box.name, strategy: "mine" }), (e) => e instanceof SandboxError && e.code === "invalid");
  await assert.rejects(box.merge({ into: "no-such-box" }), (e) => e instanceof SandboxError && e.code === "not_found");
  await assert.rejects(box.merge({ into: box.name, dryRun: "yes" }), (e) => e instanceof SandboxError && e.code === "invalid");
});
