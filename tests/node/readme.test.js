// SPDX-License-Identifier: Apache-2.0
"use strict";
// bindings/node/README.md's API example, run as it is written (an ES module importing
// "nook-sandbox"), in a folder where that name is this tree's package: the README must not show
// code that does not run (it mixed require() with top-level await, which no Node runs).
const { test, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { execFileSync } = require("node:child_process");
const { PKG, HOME, removeHome } = require("./helpers.js");

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nook-readme-"));
after(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
  await removeHome();
});

function apiExample() {
  const md = fs.readFileSync(path.join(PKG, "README.md"), "utf8");
  const m = md.slice(md.indexOf("## API")).match(/```js\n([\s\S]*?)```/);
  assert.ok(m, "README.md has a js block under ## API");
  return m[1];
}

test("the README's API example runs as written and prints 42", () => {
  fs.mkdirSync(path.join(dir, "node_modules"));
  fs.symlinkSync(PKG, path.join(dir, "node_modules", "nook-sandbox"));
  fs.writeFileSync(path.join(dir, "example.mjs"), apiExample());
  // the same runtime as this test (node or bun), the same state folder as the other tests
  const out = execFileSync(process.execPath, [path.join(dir, "example.mjs")], {
    cwd: dir,
    env: { ...process.env, NOOK_HOME: HOME },
    encoding: "utf8",
    timeout: 60000,
  });
  assert.equal(out.trim(), "42 true");
});

test("an addon that is there but cannot load says what to do (npm rebuild)", () => {
  const bad = path.join(dir, "bad.node");
  fs.writeFileSync(bad, "not an ELF file");
  const out = execFileSync(
    process.execPath,
    ["-e", `try { require(${JSON.stringify(PKG)}); console.log("loaded") } catch (e) { console.log(e.code + ": " + e.message) }`],
    { env: { ...process.env, NOOK_NODE_ADDON: bad }, encoding: "utf8", timeout: 60000 },
  );
  assert.match(out, /^missing_feature: Cannot load nook-sandbox's native addon .*bad\.node.*npm rebuild nook-sandbox/);
});
