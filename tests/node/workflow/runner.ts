// SPDX-License-Identifier: Apache-2.0
// The entry command inside the sandbox (bun, from the read-only bind mount /app): reads the
// request Smithers' provider kit shipped, runs the child workflow with Smithers' engine, and
// writes the result JSON to the result path.  Its stdout goes to stderr (see parent.tsx), so
// engine logs never mix with the result.
import fs from "node:fs";
import { Effect } from "effect";
import { closeSingleRunnerRuntime, runWorkflow } from "smithers-orchestrator";
import childWorkflow from "./child.tsx";

// runWorkflow's output is the rows of the child's `output` table; a child workflow's result is
// those rows without the system columns, one row as an object (as Smithers' own child runs do).
function childOutput(rows: unknown): unknown {
  const strip = (row: any) => {
    if (!row || typeof row !== "object") return row;
    const { runId: _r, nodeId: _n, iteration: _i, ...rest } = row;
    return rest;
  };
  if (!Array.isArray(rows)) return strip(rows);
  if (rows.length === 0) return null;
  return rows.length === 1 ? strip(rows[0]) : rows.map(strip);
}

const request = JSON.parse(fs.readFileSync(process.env.SMITHERS_SANDBOX_REQUEST_PATH!, "utf8"));
const result = await Effect.runPromise(runWorkflow(childWorkflow, { input: request.input }));
await closeSingleRunnerRuntime();
fs.writeFileSync(
  process.env.SMITHERS_SANDBOX_RESULT_PATH!,
  JSON.stringify({ status: result.status, output: childOutput(result.output), runId: result.runId, error: result.error }),
);
