// SPDX-License-Identifier: Apache-2.0
"use strict";
const addon = require("./binding.js");
const { makeBox } = require("./box.js");
const { SandboxError } = require("./errors.js");
const { checkOptions, checkName } = require("./options.js");

// Spec keys are nook's own (see nook.h): image, env, labels, persistence, maxDurationSecs,
// idleTimeoutSecs, security, network, workdir, user.  They go to libnook as JSON unchanged, so
// libnook alone decides what is valid; fields it does not support yet come back as SandboxError
// missing_feature, unknown ones as invalid.  { snapshot: NAME } boots from a snapshot.
// secrets: { NAME: { value, hosts: [...], body? } } and egress: { allowHttp, ca, audit } go as
// they are, but for egress.ca (PEM text), which is libnook's egress.caPem.
function specJson(spec) {
  if (spec === undefined || spec === null) return "{}";
  if (typeof spec !== "object" || Array.isArray(spec))
    throw new SandboxError("Invalid spec: must be an object", "invalid");
  const e = spec.egress;
  let json = spec;
  if (e && typeof e === "object" && !Array.isArray(e) && "ca" in e) {
    const { ca, ...rest } = e;
    json = { ...spec, egress: { ...rest, caPem: ca } };
  }
  try {
    return JSON.stringify(json);
  } catch (err) {
    // a BigInt, a cycle: not JSON, so not a spec
    throw new SandboxError(`Invalid spec: it cannot be written as JSON (${err.message}); use plain numbers, strings, arrays and objects`, "invalid", { cause: err });
  }
}

class Sandboxes {
  /** State under options.home, else $NOOK_HOME, else nook's default root (created, mode 0700). */
  constructor(options) {
    const o = checkOptions(options, { home: null }, "new Sandboxes");
    if (o.home !== undefined && o.home !== null) checkName(o.home, "new Sandboxes", "home");
    this.home = addon.home(o.home ?? null);
  }

  /** Creates and starts a sandbox; { replace: true } stops a running one of that name first. */
  async create(name, spec, options) {
    checkName(name, "create");
    const o = checkOptions(options, { replace: "boolean" }, "create");
    await addon.create(this.home, name, specJson(spec), o.replace ? addon.CREATE_REPLACE : 0);
    return makeBox(this, name, await addon.wsOpen(this.home, name));
  }

  /** A Box for an existing sandbox (running or stopped), or SandboxError not_found. */
  async get(name) {
    checkName(name, "get");
    await addon.inspect(this.home, name);
    return makeBox(this, name, await addon.wsOpen(this.home, name));
  }

  /** Every sandbox, as libnook describes it (name, state, spec, labels, times, workspace). */
  async list() {
    return JSON.parse(await addon.list(this.home));
  }

  async start(name) {
    checkName(name, "start");
    await addon.start(this.home, name);
  }

  async stop(name, options) {
    checkName(name, "stop");
    const o = checkOptions(options, { timeoutMs: "non-negative number" }, "stop");
    await addon.stop(this.home, name, o.timeoutMs === undefined ? undefined : Math.ceil(o.timeoutMs));
  }

  /** Deletes the sandbox, its workspace and its state, unconditionally. */
  async remove(name) {
    checkName(name, "remove");
    await addon.remove(this.home, name);
  }

  /**
   * New sandboxes from src's current disk state (root layer and workspace, copy-on-write where
   * the filesystem reflinks; a running src is paused for the copy only).  Resolves with a Box
   * named `name`, or with { count: N } (1..100) an array of Boxes `name-1` .. `name-N` (all or
   * none).  A branch of a running src runs; of a stopped one stays stopped.
   */
  async branch(src, name, options) {
    checkName(src, "branch", "source name");
    checkName(name, "branch");
    const count = checkOptions(options, { count: "positive integer" }, "branch").count; // libnook: at most 100
    const names = JSON.parse(await addon.branch(this.home, src, name, count ?? 0));
    const boxes = [];
    for (const n of names) boxes.push(makeBox(this, n, await addon.wsOpen(this.home, n)));
    return count === undefined ? boxes[0] : boxes;
  }

  /** Every snapshot, newest first, as libnook describes them (box.snapshot() makes one). */
  async snapshots() {
    return JSON.parse(await addon.snapshotList(this.home));
  }

  /** One snapshot by name or digest (with usedBy), or SandboxError not_found. */
  async inspectSnapshot(name) {
    checkName(name, "inspectSnapshot");
    return JSON.parse(await addon.snapshotInspect(this.home, name));
  }

  /** Deletes a snapshot; refused (busy) while a sandbox boots from it or a snapshot builds on it. */
  async removeSnapshot(name) {
    checkName(name, "removeSnapshot");
    await addon.snapshotRemove(this.home, name);
  }

  /** The host path of name's workspace, even before create().  Synchronous; creates nothing. */
  workspaceDir(name) {
    checkName(name, "workspaceDir");
    return addon.wsDir(this.home, name);
  }
}

module.exports = { Sandboxes };
