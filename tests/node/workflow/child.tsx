/** @jsxImportSource smithers-orchestrator */
// SPDX-License-Identifier: Apache-2.0
// The child workflow: rendered and run by runner.ts inside the nook sandbox.  Its one task's
// value is computed where it runs: the hostname (nook sets it to the sandbox name) and what
// only the sandbox has (the request file Smithers' kit shipped into /workspace).
import fs from "node:fs";
import os from "node:os";
import { createSmithers } from "smithers-orchestrator";
import { z } from "zod";

const child = createSmithers(
  {
    input: z.object({ prompt: z.string() }),
    output: z.object({ host: z.string(), prompt: z.string(), sawRequest: z.boolean(), cwd: z.string() }),
  },
  { dbPath: process.env.NOOK_WF_CHILD_DB ?? "./smithers-child.db" },
);

export default child.smithers((ctx) => (
  <child.Workflow name="nook-child">
    <child.Task id="where" output={child.outputs.output}>
      {{
        host: os.hostname(),
        prompt: `child saw: ${ctx.input.prompt}`,
        sawRequest: fs.existsSync("/workspace/.smithers/sandbox-request.json"),
        cwd: process.cwd(),
      }}
    </child.Task>
  </child.Workflow>
));
