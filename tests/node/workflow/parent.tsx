/** @jsxImportSource smithers-orchestrator */
// SPDX-License-Identifier: Apache-2.0
// The parent workflow, started by the smithers CLI under Bun (workflow.test.js): one <Sandbox>
// whose provider is nook's; the child workflow (child.tsx) runs inside the sandbox.  This
// directory (its node_modules: bun, smithers) is bind-mounted read-only at /app.
import { createRequire } from "node:module";
import path from "node:path";
import { createSmithers, Sandbox } from "smithers-orchestrator";
import { z } from "zod";
import childWorkflow from "./child.tsx";

const require = createRequire(import.meta.url);
// NOOK_NODE_PKG: bindings/node (run.sh sets it when this directory is a copy under the build dir)
const pkg = process.env.NOOK_NODE_PKG ?? path.resolve(import.meta.dir, "..", "..", "..", "bindings", "node");
const { createNookSandboxProvider } = require(path.join(pkg, "lib", "smithers.js"));

const provider = createNookSandboxProvider({
  command: "/app/node_modules/.bin/bun /app/runner.ts 1>&2",
  sandboxName: process.env.NOOK_WF_SANDBOX,
  env: { HOME: "/workspace", NOOK_WF_CHILD_DB: "/workspace/smithers-child.db" },
});

const parent = createSmithers(
  {
    input: z.object({ prompt: z.string() }),
    output: z.object({ host: z.string(), prompt: z.string(), sawRequest: z.boolean(), cwd: z.string() }),
  },
  { dbPath: process.env.NOOK_WF_PARENT_DB ?? "./smithers.db" },
);

export default parent.smithers((ctx) => (
  <parent.Workflow name="nook-parent">
    <Sandbox
      id="in-nook"
      provider={provider}
      workflow={childWorkflow}
      input={{ prompt: ctx.input.prompt }}
      output={parent.outputs.output}
      volumes={[{ host: import.meta.dir, container: "/app", readonly: true }]}
      allowNetwork={false}
    />
  </parent.Workflow>
));
