// SPDX-License-Identifier: Apache-2.0
"use strict";
// box.pause() / box.resume() / sandboxes.branch() against the real addon (docs/design/branch.md).
const { test, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { HOME, nook, uniqueName, removeHome } = require("./helpers.js");
const { Sandboxes, SandboxError } = nook;

const sandboxes = new Sandboxes({ home: HOME });

after(async () => {
  await removeHome();
});

function isCode(code) {
  return (err) => {
    assert.ok(err instanceof SandboxError, `expected a SandboxError, got ${err}`);
    assert.equal(err.code, code, `${err.code}: ${err.message}`);
    return true;
  };
}

test("pause freezes exec, resume thaws; inspect says paused", async (t) => {
  const box = await sandboxes.create(uniqueName("p"), {});
  try {
    await box.pause();
  } catch (err) {
    if (err instanceof SandboxError && err.code === "missing_feature") {
      t.skip(`no writable cgroup freezer here: ${err.message}`);
      await sandboxes.remove(box.name);
      return;
    }
    throw err;
  }
  assert.equal((await box.inspect()).state, "paused");
  await assert.rejects(box.exec("true"), (err) => isCode("state")(err) && /nook resume/.test(err.message));
  await box.writeFile("/while-paused.txt", "host write"); // the workspace is a host folder
  await box.resume();
  assert.equal((await box.inspect()).state, "running");
  const res = await box.exec("cat /workspace/while-paused.txt");
  assert.equal(res.stdout, "host write");
  await sandboxes.remove(box.name);
});

test("branch: a new Box with the source's workspace; count makes name-1..name-N", async () => {
  const src = await sandboxes.create(uniqueName("src"), { persistence: "sticky" });
  await src.writeFile("/a.txt", "from src");
  await src.stop(); // a stopped source branches on every host (a running one needs the freezer)
  const name = uniqueName("b");
  const b = await sandboxes.branch(src.name, name);
  assert.equal(b.name, name);
  assert.equal(fs.readFileSync(path.join(b.workspaceDir, "a.txt"), "utf8"), "from src");
  const info = await b.inspect();
  assert.equal(info.branchOf, src.name);
  assert.match(info.branchPoint, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(info.state, "stopped");
  await b.writeFile("/a.txt", "from branch");
  assert.equal(await src.readFile("/a.txt", "utf8"), "from src");

  const many = await sandboxes.branch(src.name, uniqueName("m"), { count: 2 });
  assert.ok(Array.isArray(many));
  assert.deepEqual(many.map((x) => x.name.replace(/^.*-/, "")), ["1", "2"]);
  for (const m of many) assert.equal(await m.readFile("/a.txt", "utf8"), "from src");

  for (const bad of [0, -1, 1.5, "2", null]) {
    await assert.rejects(sandboxes.branch(src.name, uniqueName("x"), { count: bad }), isCode("invalid"));
  }
  await assert.rejects(sandboxes.branch(src.name, uniqueName("x"), { count: 101 }), isCode("invalid"));
  await assert.rejects(sandboxes.branch(uniqueName("missing"), uniqueName("x")), isCode("not_found"));
  await assert.rejects(sandboxes.branch(src.name, b.name), isCode("exists"));
  await assert.rejects(sandboxes.branch(src.name, "Bad Name"), isCode("invalid"));
  for (const x of [b, ...many, src]) await sandboxes.remove(x.name);
});
