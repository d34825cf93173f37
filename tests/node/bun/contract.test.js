// SPDX-License-Identifier: Apache-2.0
// Smithers' own provider contract suite (@smithers-orchestrator/sandbox@0.32.0), under bun:test,
// against createNookSandboxProvider with the entry command really running inside nook.
//
// The suite's handler is a function in this process, so the entry command is a bridge: a node
// script inside the sandbox sends what it sees (argv, its env, the request file) through the
// workspace (a host directory: a plain file on both sides) and prints the handler's answer,
// which a host-side loop computes by calling the handler.  Destruction is observed, not
// mocked: onDestroy fires when cleanup really removed the sandbox.
import { afterAll } from "bun:test";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const PKG = path.resolve(import.meta.dir, "..", "..", "..", "bindings", "node");
process.env.NOOK_HOME ||= fs.mkdtempSync(path.join(os.tmpdir(), "nook-bun-contract-"));
const HOME = process.env.NOOK_HOME;

const { Sandboxes } = require(PKG);
const { removeHomeFolders } = require(path.join(import.meta.dir, "..", "home.js"));
const { createNookSandboxProvider, registerNookSandboxProvider, NOOK_PROVIDER_ID } = require(path.join(PKG, "lib", "smithers.js"));
const { createSandboxProviderContractSuite } = await import(
  path.join(PKG, "node_modules/@smithers-orchestrator/sandbox/src/provider-kit/createSandboxProviderContractSuite.js")
);

const sandboxes = new Sandboxes({ home: HOME });

const BRIDGE = `
const fs = require("fs");
const dir = "/workspace/.bridge";
fs.mkdirSync(dir, { recursive: true });
const reqPath = process.env.SMITHERS_SANDBOX_REQUEST_PATH;
fs.writeFileSync(dir + "/call.tmp", JSON.stringify({
  command: process.argv.slice(1).join(" "),
  request: JSON.parse(fs.readFileSync(reqPath, "utf8")),
  files: { [reqPath]: fs.readFileSync(reqPath, "utf8") },
  env: process.env,
}));
fs.renameSync(dir + "/call.tmp", dir + "/call.json");
const wait = new Int32Array(new SharedArrayBuffer(4));
for (let i = 0; i < 60000 && !fs.existsSync(dir + "/reply.json"); i++) Atomics.wait(wait, 0, 0, 2);
process.stdout.write(fs.readFileSync(dir + "/reply.json", "utf8"));
`;

let seq = 0;
const leftovers = new Set();

function createProvider(handler, providerOptions = {}) {
  const { onDestroy, ...options } = providerOptions;
  const name = `contract-${process.pid}-${seq++}`;
  leftovers.add(name);
  const provider = createNookSandboxProvider({
    ...options,
    sandboxes,
    sandboxName: name,
    setupFiles: { "/workspace/run-smithers-sandbox.js": BRIDGE },
  });
  return {
    ...provider,
    async run(request) {
      const bridge = path.join(sandboxes.workspaceDir(name), ".bridge");
      let stop = false;
      const serve = (async () => {
        while (!stop) {
          const call = path.join(bridge, "call.json");
          if (fs.existsSync(call)) {
            const c = JSON.parse(fs.readFileSync(call, "utf8"));
            fs.rmSync(call);
            const result = await handler({ command: c.command, request: c.request, files: new Map(Object.entries(c.files)), env: c.env });
            fs.writeFileSync(path.join(bridge, "reply.tmp"), JSON.stringify(result));
            fs.renameSync(path.join(bridge, "reply.tmp"), path.join(bridge, "reply.json"));
          }
          await Bun.sleep(2);
        }
      })();
      try {
        return await provider.run(request);
      } finally {
        stop = true;
        await serve;
      }
    },
    async cleanup(request) {
      await provider.cleanup(request);
      const still = (await sandboxes.list()).some((s) => s.name === name);
      if (!still) onDestroy?.();
    },
  };
}

createSandboxProviderContractSuite({
  name: "nook sandbox provider (real sandboxes)",
  expectedProviderId: NOOK_PROVIDER_ID,
  createProvider,
});

import { test, expect } from "bun:test";
test("registerNookSandboxProvider registers in Smithers' registry under Bun", () => {
  const unregister = registerNookSandboxProvider({ sandboxes });
  expect(typeof unregister).toBe("function");
  unregister();
});

afterAll(async () => {
  for (const name of leftovers) await sandboxes.remove(name).catch(() => undefined);
  if (process.env.NOOK_HOME_KEEP) return;
  removeHomeFolders(HOME);
});
