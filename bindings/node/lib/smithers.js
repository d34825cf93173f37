// SPDX-License-Identifier: Apache-2.0
"use strict";
// nook as a Smithers SandboxProvider (`nook/smithers`), built on Smithers' own provider kit
// (createCommandSandboxProvider): request shipping, egress env, result parsing and secret
// scrubbing are Smithers' code; this file only maps a SandboxSession onto a nook Box.  Options
// and behaviour follow @smithers-orchestrator/microsandbox; see README.md for the differences.
//
// Smithers' packages are ESM.  We load the kit's individual modules (Node >= 20.19 and Bun load
// ESM from require()); the package index also pulls in Bun-only modules (bun:sqlite, bun:test).
// They are an optional peer dependency of nook-sandbox: the application installs them, and
// nook-sandbox/smithers uses that very copy (one provider registry, one SmithersError class).
const { createHash } = require("node:crypto");
const { isIP } = require("node:net");
const { posix } = require("node:path");
const { SandboxError } = require("./errors.js");

const SMITHERS_INSTALL = "npm install @smithers-orchestrator/sandbox@0.32.0";

/** require() of a Smithers module, or a SandboxError saying exactly what to install. */
function requireSmithers(id) {
  try {
    return require(id);
  } catch (error) {
    const code = error && error.code;
    if ((code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND") && String(error.message).includes("@smithers-orchestrator/"))
      throw new SandboxError(
        `nook-sandbox/smithers needs Smithers' sandbox kit (${id}), an optional peer dependency that is not installed. Install it in your project: ${SMITHERS_INSTALL}`,
        "missing_feature",
        { cause: error },
      );
    if (code === "ERR_REQUIRE_ESM")
      throw new SandboxError(
        `nook-sandbox/smithers loads Smithers' ES modules with require(), which needs Node >= 20.19 (or Bun); this is Node ${process.versions.node}`,
        "missing_feature",
        { cause: error },
      );
    throw error;
  }
}

const { createCommandSandboxProvider } = requireSmithers("@smithers-orchestrator/sandbox/provider-kit/createCommandSandboxProvider");
const { normalizeSandboxEgressConfig } = requireSmithers("@smithers-orchestrator/sandbox/egress");
const { SmithersError } = requireSmithers("@smithers-orchestrator/errors/SmithersError");
const addon = require("./binding.js");
const { Sandboxes } = require("./sandboxes.js");

const NOOK_PROVIDER_ID = "nook";
// nook's default image is the host's own /usr (read-only), where node lives.
const DEFAULT_COMMAND = "node /workspace/run-smithers-sandbox.js";
const DEFAULT_WORKDIR = "/workspace";
const DEFAULT_SHELL = "/bin/sh";
const MAX_NAME_BYTES = 63; // nook_name_validate: 1-63 chars of [a-z0-9][a-z0-9_.-]*
const MAX_SMITHERS_NAME_BYTES = 128; // microsandbox's limit, case kept
const SMITHERS_NAME_LABEL = "smithers.sandboxName";
const SECRET_KEY_RE = /token|secret|key|password|credential|authorization|passwd|apikey/i;

/**
 * @param {import("../smithers").NookSandboxProviderOptions} [options]
 * @returns {import("@smithers-orchestrator/sandbox").SandboxProvider}
 */
function createNookSandboxProvider(options = {}) {
  validateFactoryOptions(options);
  const id = options.id ?? NOOK_PROVIDER_ID;
  const workdir = options.workdir ?? DEFAULT_WORKDIR;
  const cleanup = options.cleanup ?? "destroy";
  const sandboxes = options.sandboxes ?? new Sandboxes({ home: options.home });

  return createCommandSandboxProvider({
    id,
    command: options.command ?? DEFAULT_COMMAND,
    workdir,
    env: options.env,
    cleanup,
    createSession: async (request) => {
      const config = asRecord(request.config);
      const workspace = normalizeWorkspace(config.workspace);
      const sticky = workspace?.persistence === "sticky";
      // as microsandbox: cleanup "keep" leaves the sandbox (nook's always run detached from the
      // caller) with its writable layer, unless ephemeral says otherwise
      const ephemeral = sticky ? false : (options.ephemeral ?? cleanup !== "keep");
      const { name, smithersName } = resolveSandboxName(options.sandboxName, workspace, request);
      const creationTimeoutMs = options.creationTimeoutMs ?? request.toolTimeoutMs;
      const secretValues = collectSecretValues(options.env, config.env, request.egress);

      let box;
      let createdNew = false;
      try {
        if (request.signal?.aborted) throw new SandboxError("nook sandbox creation aborted", "state");
        if (sticky) box = await openSticky(sandboxes, name);
        // branchFrom: this <Sandbox> starts as a branch of a kept sandbox (its root layer and
        // workspace, copy-on-write; its spec, not this provider's image/resources)
        const branchFrom = config.branchFrom ?? options.branchFrom;
        if (!box && branchFrom !== undefined) {
          if (!pickString(branchFrom)) invalid("nook branchFrom must be the name of an existing sandbox.");
          const creating = sandboxes.branch(branchFrom, name).then(async (b) => {
            if ((await b.inspect()).state !== "running") await b.start(); // a stopped source's branch
            return b;
          });
          try {
            box = await raceWithAbort(creating, request.signal, creationTimeoutMs, `nook branch '${name}' of '${branchFrom}'`);
          } catch (error) {
            creating.then(() => sandboxes.remove(name)).catch(() => undefined);
            throw error;
          }
          createdNew = true;
        }
        if (!box) {
          const spec = buildSpec(options, request, { config, workspace, workdir, ephemeral, smithersName });
          const replace = !sticky && options.replaceExisting !== false;
          if (replace && options.replaceTimeoutMs !== undefined)
            await sandboxes.stop(name, { timeoutMs: Math.max(1, options.replaceTimeoutMs) }).catch(ignoreNotFound);
          const creating = sandboxes.create(name, spec, { replace });
          try {
            box = await raceWithAbort(creating, request.signal, creationTimeoutMs, `nook sandbox '${name}'`);
          } catch (error) {
            // a create that finishes after we gave up is removed, not leaked
            creating.then(() => sandboxes.remove(name)).catch(() => undefined);
            throw error;
          }
          createdNew = true;
        }
        await ensureDirectory(box, workdir);
        await uploadSetupFiles(box, splitSetupFiles(options.setupFiles).workspace);
      } catch (error) {
        if (box && createdNew) {
          await (sticky ? box.stop({ timeoutMs: options.stopTimeoutMs }) : sandboxes.remove(name)).catch(() => undefined);
        }
        // as microsandbox: Smithers' own errors (INVALID_INPUT) as they are, the rest as
        // SANDBOX_EXECUTION_FAILED with the scrubbed cause
        if (error instanceof SmithersError) throw scrubError(error, secretValues);
        throw new SmithersError(
          "SANDBOX_EXECUTION_FAILED",
          `nook sandbox creation failed: ${scrubSecrets(messageOf(error), secretValues)}`,
          { provider: id, remoteId: name, code: error instanceof SandboxError ? error.code : undefined },
          { cause: scrubError(error, secretValues) },
        );
      }

      const active = box;
      return {
        remoteId: name,
        async writeFile(path, content) {
          await writeGuestFile(active, path, content);
        },
        async readFile(path) {
          return readGuestFile(active, path);
        },
        async exec(command, { cwd, env, timeoutMs, signal }) {
          if (signal?.aborted) throw new Error("nook command aborted before it started.");
          const effectiveCommand = options.command ?? pickString(config.command) ?? command;
          const requestEnv = normalizeStringRecord(config.env, "Sandbox env") ?? {};
          const { plain, secret } = splitSecretEnv({ ...requestEnv, ...env }, request.egress);
          const shell = options.shell ?? DEFAULT_SHELL;
          const res = await active.exec(shell === DEFAULT_SHELL ? effectiveCommand : [shell, "-lc", effectiveCommand], {
            cwd,
            env: plain,
            secretEnv: secret,
            timeoutMs: Number.isFinite(timeoutMs) && timeoutMs > 0 ? timeoutMs : undefined,
            signal,
          });
          if (res.reason === "timeout") throw new Error(`nook command timed out after ${timeoutMs}ms.`);
          if (res.reason === "cancelled") throw new Error("nook command aborted.");
          if (res.reason === "stopped") throw new Error(`nook sandbox '${name}' stopped while the command ran.`);
          return { exitCode: res.exitCode, stdout: res.stdout, stderr: res.stderr };
        },
        async destroy() {
          try {
            if (sticky) await active.stop({ timeoutMs: options.stopTimeoutMs });
            else {
              if (options.stopTimeoutMs !== undefined) await active.stop({ timeoutMs: Math.max(1, options.stopTimeoutMs) });
              await sandboxes.remove(name).catch(ignoreNotFound);
            }
          } catch (error) {
            throw new SmithersError(
              "SANDBOX_EXECUTION_FAILED",
              `nook cleanup failed: ${scrubSecrets(messageOf(error), secretValues)}`,
              { provider: id, remoteId: name },
            );
          }
        },
      };
    },
  });
}

/** Builds and registers the provider in Smithers' registry; returns the unregister function. */
function registerNookSandboxProvider(options = {}) {
  let registry;
  try {
    registry = require("@smithers-orchestrator/sandbox/execute");
  } catch (error) {
    throw new SandboxError(
      `registerNookSandboxProvider needs Smithers' runtime (Bun, as the smithers CLI uses), which could not be loaded here: ${messageOf(error)}. Pass createNookSandboxProvider(...) to <Sandbox provider> instead.`,
      "missing_feature",
    );
  }
  return registry.registerSandboxProvider(createNookSandboxProvider(options));
}

// ---- spec ----------------------------------------------------------------------------------

/** The nook spec for a request: Smithers props and provider options, in nook's own keys. */
function buildSpec(options, request, resolved) {
  const { config, workspace, workdir, ephemeral, smithersName } = resolved;
  const spec = {};
  const snapshot = workspace?.snapshotId ?? pickString(config.snapshot) ?? options.snapshot;
  const image = pickString(config.image) ?? options.image;
  if (snapshot) spec.snapshot = snapshot; // cold boot from it: its base image and its layer
  else if (image) spec.image = image;

  const resources = asRecord(config.resources);
  const cpus = normalizeCpuCount(config.cpus ?? resources.cpu ?? config.cpuLimit, options.cpus);
  const memoryMib = normalizeMemoryMib(config.memoryMib ?? resources.memory ?? config.memoryLimit, options.memoryMib);
  if (cpus !== undefined) spec.cpus = cpus;
  if (options.maxCpus !== undefined) spec.maxCpus = options.maxCpus;
  if (memoryMib !== undefined) spec.memoryMib = memoryMib;
  if (options.maxMemoryMib !== undefined) spec.maxMemoryMib = options.maxMemoryMib;

  spec.persistence = ephemeral ? "ephemeral" : "sticky";
  if (options.security) spec.security = options.security;
  if (options.pullPolicy) spec.pullPolicy = options.pullPolicy;
  // the Smithers name as given (case and length kept): nook's name maps from it (see sanitizeSandboxName)
  spec.labels = { ...(options.labels ?? {}), [SMITHERS_NAME_LABEL]: smithersName };
  if (options.scripts && Object.keys(options.scripts).length > 0) spec.scripts = { ...options.scripts };
  // secrets by placeholder and HTTP rules (nook's egress gateway): need allowNetwork
  if (options.secrets && Object.keys(options.secrets).length > 0) spec.secrets = { ...options.secrets };
  if (options.egress) {
    const { ca, ...rest } = options.egress;
    spec.egress = ca === undefined ? { ...rest } : { ...rest, caPem: ca };
  }
  if (options.maxDurationSecs !== undefined) spec.maxDurationSecs = options.maxDurationSecs;
  const idleTimeoutSecs = workspace?.idleTimeoutSecs ?? options.idleTimeoutSecs;
  if (idleTimeoutSecs !== undefined) spec.idleTimeoutSecs = idleTimeoutSecs;

  const ports = normalizePorts(config.ports);
  if (!request.allowNetwork) {
    if (ports.length > 0) invalid("nook port publishing requires allowNetwork=true.");
    spec.network = "off";
  } else {
    spec.network = "public"; // public addresses only: private ranges and the host are refused
    const rules = egressProxyRules(request.egress);
    if (rules.length > 0) spec.networkPolicy = { rules }; // exceptions to that floor
    if (ports.length > 0) spec.ports = ports.map((p) => `${p.host}:${p.container}`); // "[ADDR:]HOSTPORT:PORT"
  }
  const volumes = normalizeVolumes(config.volumes, workdir);
  if (volumes.length > 0)
    spec.volumes = volumes.map((v) => ({ type: "bind", source: v.host, target: v.container, readonly: v.readonly }));
  const { guest } = splitSetupFiles(options.setupFiles);
  if (Object.keys(guest).length > 0) spec.setupFiles = guest;

  const custom = options.configure?.(spec, request);
  return custom ?? spec;
}

/** The request's egress proxies (httpProxy, httpsProxy) named by IP address: one allow rule for
 * each proxy's address and port, so a proxy at a private address stays reachable through the
 * public-only floor, and nothing else of its network does.  A proxy named by a host name gets no
 * rule (a name resolving to a private address is refused, as any DNS rebinding). */
function egressProxyRules(egress) {
  let normalized;
  try {
    normalized = normalizeSandboxEgressConfig(egress);
  } catch {
    return []; // an invalid egress config is reported by the kit
  }
  const rules = [];
  for (const [field, value] of [["httpProxy", normalized?.httpProxy], ["httpsProxy", normalized?.httpsProxy]]) {
    if (!value) continue;
    let url;
    try {
      url = new URL(value);
    } catch {
      invalid(`Sandbox egress.${field} is not a URL.`); // the value may hold credentials: not echoed
    }
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
    const family = isIP(host);
    const port = url.port || { "http:": "80", "https:": "443" }[url.protocol];
    if (family === 0 || !port) continue;
    const rule = { action: "allow", cidr: `${host}/${family === 4 ? 32 : 128}`, ports: port };
    if (!rules.some((r) => r.cidr === rule.cidr && r.ports === rule.ports)) rules.push(rule);
  }
  return rules;
}

async function openSticky(sandboxes, name) {
  let box;
  try {
    box = await sandboxes.get(name);
  } catch (error) {
    if (error instanceof SandboxError && error.code === "not_found") return undefined;
    throw error;
  }
  const info = await box.inspect();
  if (info.state !== "running") await box.start();
  return box;
}

// ---- guest files: host reads and writes under /workspace, a command elsewhere --------------

function workspaceRelative(path) {
  const p = posix.normalize(path);
  if (p === "/workspace" || p.startsWith("/workspace/")) return path;
  return undefined;
}

async function ensureDirectory(box, dir) {
  if (workspaceRelative(dir) !== undefined) return box.mkdir(dir);
  const res = await box.exec(["mkdir", "-p", "--", dir]);
  if (res.exitCode !== 0) throw new SandboxError(`Cannot create '${dir}' in the sandbox: ${res.stderr.trim()}`, "io");
}

async function writeGuestFile(box, path, content) {
  if (workspaceRelative(path) !== undefined) return box.writeFile(path, content);
  const res = await box.exec(["/bin/sh", "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', "sh", path], {
    stdin: Buffer.from(content),
  });
  if (res.exitCode !== 0) throw new SandboxError(`Cannot write '${path}' in the sandbox: ${res.stderr.trim()}`, "io");
}

async function readGuestFile(box, path) {
  if (workspaceRelative(path) !== undefined) return (await box.readFile(path)).toString("utf8");
  const res = await box.exec(["cat", "--", path]);
  if (res.exitCode !== 0) throw new SandboxError(`Cannot read '${path}' in the sandbox: ${res.stderr.trim()}`, "io");
  return res.stdout;
}

/** Setup files under /workspace are host writes after boot; the others go to libnook's spec. */
function splitSetupFiles(files) {
  const workspace = {};
  const guest = {};
  for (const [path, content] of Object.entries(files ?? {})) {
    if (workspaceRelative(path) !== undefined) workspace[path] = content;
    else guest[path] = typeof content === "string" ? content : { base64: Buffer.from(content).toString("base64") };
  }
  return { workspace, guest };
}

async function uploadSetupFiles(box, files) {
  for (const [path, content] of Object.entries(files)) await box.writeFile(path, content);
}

// ---- secrets -------------------------------------------------------------------------------

/** Secret-looking keys and every egress-injected value go as secretEnv: never persisted. */
function splitSecretEnv(env, egress) {
  const egressKeys = new Set(["HTTP_PROXY", "HTTPS_PROXY"]);
  const normalized = normalizeSandboxEgressConfig(egress);
  for (const key of Object.keys(normalized?.env ?? {})) egressKeys.add(key);
  const plain = {};
  const secret = {};
  for (const [key, value] of Object.entries(env)) {
    if (typeof value !== "string") continue;
    if (SECRET_KEY_RE.test(key) || egressKeys.has(key)) secret[key] = value;
    else plain[key] = value;
  }
  return { plain, secret };
}

function collectSecretValues(providerEnv, requestEnv, egress) {
  const values = [];
  for (const source of [providerEnv ?? {}, asRecord(requestEnv)])
    for (const [key, value] of Object.entries(source))
      if (SECRET_KEY_RE.test(key) && typeof value === "string" && value.length > 0) values.push(value);
  try {
    const normalized = normalizeSandboxEgressConfig(egress);
    for (const value of Object.values(normalized?.env ?? {})) if (value) values.push(value);
    for (const value of [normalized?.httpProxy, normalized?.httpsProxy]) if (value) values.push(value);
  } catch {
    // an invalid egress config is reported by the kit
  }
  return values;
}

function scrubSecrets(message, secrets) {
  let out = String(message);
  for (const secret of secrets) out = out.split(secret).join("[redacted]");
  return out;
}

function scrubError(error, secrets) {
  if (secrets.length === 0 || !(error instanceof Error)) return error;
  const scrubbed = scrubSecrets(error.message, secrets);
  if (scrubbed !== error.message) error.message = scrubbed;
  return error;
}

// ---- names and props (as the microsandbox provider reads them) -----------------------------

function resolveSandboxName(configured, workspace, request) {
  const workspaceName = workspace?.name;
  const derived =
    workspaceName && workspace?.persistence === "sticky"
      ? workspaceName
      : workspaceName
        ? `${workspaceName}-${request.runId}-${request.sandboxId}`
        : undefined;
  const raw =
    typeof configured === "function"
      ? configured(request)
      : (configured ?? derived ?? `smithers-${request.runId}-${request.sandboxId}`);
  if (typeof raw !== "string" || raw.trim().length === 0) invalid("nook sandboxName must resolve to a non-empty string.");
  const smithersName = smithersSandboxName(raw);
  return { name: sanitizeSandboxName(smithersName), smithersName };
}

/** The name microsandbox would give (<= 128 bytes, case kept): kept in a label of the sandbox. */
function smithersSandboxName(raw) {
  const trimmed = raw.trim();
  let normalized = trimmed.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[^A-Za-z0-9]+/, "");
  if (!normalized) normalized = "smithers";
  const hash = createHash("sha256").update(trimmed).digest("hex").slice(0, 10);
  if (normalized !== trimmed) normalized = `${normalized}-${hash}`;
  if (Buffer.byteLength(normalized) <= MAX_SMITHERS_NAME_BYTES) return normalized;
  return `${normalized.slice(0, MAX_SMITHERS_NAME_BYTES - hash.length - 1)}-${hash}`;
}

/** A nook name: 1-63 of [a-z0-9][a-z0-9_.-]*; a changed name gets a hash of the original, so
 * two Smithers names that differ only in case or past byte 63 never share a sandbox.  The
 * mapping is reversible through the sandbox's label smithers.sandboxName (the name as given). */
function sanitizeSandboxName(raw) {
  const trimmed = raw.trim();
  let normalized = trimmed
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, "-")
    .replace(/\.{2,}/g, ".")
    .replace(/^[^a-z0-9]+/, "");
  if (!normalized) normalized = "smithers";
  const hash = createHash("sha256").update(trimmed).digest("hex").slice(0, 10);
  if (normalized !== trimmed) normalized = `${normalized}-${hash}`;
  if (normalized.length <= MAX_NAME_BYTES) return normalized;
  return `${normalized.slice(0, MAX_NAME_BYTES - hash.length - 1)}-${hash}`;
}

function normalizeWorkspace(value) {
  if (value === undefined) return undefined;
  const source = requireRecord(value, "Sandbox workspace");
  const workspace = {};
  if (source.name !== undefined) {
    if (typeof source.name !== "string" || source.name.trim().length === 0) invalid("Sandbox workspace name must be non-empty.");
    workspace.name = source.name.trim();
  }
  if (source.snapshotId !== undefined) {
    if (typeof source.snapshotId !== "string" || source.snapshotId.trim().length === 0)
      invalid("Sandbox workspace snapshotId must be non-empty.");
    workspace.snapshotId = source.snapshotId.trim();
  }
  if (source.idleTimeoutSecs !== undefined) {
    validateNonNegativeNumber(source.idleTimeoutSecs, "workspace.idleTimeoutSecs");
    workspace.idleTimeoutSecs = source.idleTimeoutSecs;
  }
  if (source.persistence !== undefined) {
    if (source.persistence !== "ephemeral" && source.persistence !== "sticky")
      invalid("Sandbox workspace persistence must be ephemeral or sticky.");
    workspace.persistence = source.persistence;
  }
  return workspace;
}

function normalizePorts(value) {
  if (value === undefined) return [];
  if (!Array.isArray(value)) invalid("Sandbox ports must be an array of { host, container } mappings.");
  return value.map((entry, index) => {
    const port = requireRecord(entry, `ports[${index}]`);
    return {
      host: normalizePort(port.host, `ports[${index}].host`),
      container: normalizePort(port.container, `ports[${index}].container`),
    };
  });
}

function normalizeVolumes(value, workdir) {
  if (value === undefined) return [];
  if (!Array.isArray(value)) invalid("Sandbox volumes must be an array of { host, container, readonly } mappings.");
  return value.map((entry, index) => {
    const volume = requireRecord(entry, `volumes[${index}]`);
    if (typeof volume.host !== "string" || !volume.host.startsWith("/"))
      invalid(`volumes[${index}].host must be an absolute host path.`);
    if (typeof volume.container !== "string" || !isAbsoluteGuestPath(volume.container))
      invalid(`volumes[${index}].container must be an absolute guest path.`);
    if (pathsOverlap(volume.container, workdir))
      invalid("nook volumes may not overlap the provider workdir.", { container: volume.container, workdir });
    return { host: volume.host, container: volume.container, readonly: volume.readonly === undefined ? true : Boolean(volume.readonly) };
  });
}

/** cpuLimit: rounded up to whole CPUs. */
function normalizeCpuCount(value, fallback) {
  if (value === undefined) return fallback;
  const parsed = typeof value === "string" ? Number(value) : value;
  if (typeof parsed !== "number" || !Number.isFinite(parsed) || parsed <= 0) invalid("Sandbox cpuLimit must be a positive number.");
  return Math.ceil(parsed);
}

/** memoryLimit: a number is MiB; a Docker-style string ("512m", "2g") is read by libnook's size parser. */
function normalizeMemoryMib(value, fallback) {
  if (value === undefined) return fallback;
  if (typeof value === "number") {
    if (!Number.isFinite(value) || value <= 0) invalid("Sandbox memory must be a positive MiB value.");
    return Math.ceil(value);
  }
  if (typeof value !== "string") invalid("Sandbox memoryLimit must be a Docker-style size string.");
  let bytes;
  try {
    bytes = addon.parseSize(value);
  } catch (error) {
    invalid(`Sandbox memoryLimit: ${messageOf(error)}`);
  }
  if (!(bytes > 0)) invalid("Sandbox memoryLimit must be positive.");
  return Math.max(1, Math.ceil(bytes / 1024 ** 2));
}

function normalizePort(value, field) {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) invalid(`${field} must be an integer from 1 to 65535.`);
  return port;
}

function validateFactoryOptions(options) {
  if (options.image && options.snapshot) invalid("nook provider accepts either image or snapshot, not both.");
  if (options.image !== undefined && !pickString(options.image)) invalid("nook image must be a non-empty string.");
  if (options.snapshot !== undefined && !pickString(options.snapshot)) invalid("nook snapshot must be a non-empty string.");
  if (options.branchFrom !== undefined && !pickString(options.branchFrom))
    invalid("nook branchFrom must be the name of an existing sandbox.");
  const workdir = options.workdir ?? DEFAULT_WORKDIR;
  if (!isAbsoluteGuestPath(workdir)) invalid("nook workdir must be an absolute guest path.", { workdir });
  const shell = options.shell ?? DEFAULT_SHELL;
  if (!isAbsoluteGuestPath(shell)) invalid("nook shell must be an absolute guest path.", { shell });
  for (const f of ["cpus", "maxCpus", "memoryMib", "maxMemoryMib"]) validatePositiveInteger(options[f], f);
  validatePositiveNumber(options.maxDurationSecs, "maxDurationSecs");
  validateNonNegativeNumber(options.idleTimeoutSecs, "idleTimeoutSecs");
  validatePositiveNumber(options.creationTimeoutMs, "creationTimeoutMs");
  validateNonNegativeNumber(options.replaceTimeoutMs, "replaceTimeoutMs");
  validateNonNegativeNumber(options.stopTimeoutMs, "stopTimeoutMs");
  if (options.maxCpus !== undefined && options.cpus !== undefined && options.maxCpus < options.cpus)
    invalid("nook maxCpus must be greater than or equal to cpus.");
  if (options.maxMemoryMib !== undefined && options.memoryMib !== undefined && options.maxMemoryMib < options.memoryMib)
    invalid("nook maxMemoryMib must be greater than or equal to memoryMib.");
  for (const path of Object.keys(options.setupFiles ?? {}))
    if (!isAbsoluteGuestPath(path)) invalid("nook setupFiles keys must be absolute guest paths.", { path });
  if (options.configure !== undefined && typeof options.configure !== "function") invalid("nook configure must be a function.");
}

function raceWithAbort(promise, signal, timeoutMs, what) {
  return new Promise((resolve, reject) => {
    let timer;
    const finish = (fn, value) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      fn(value);
    };
    const onAbort = () => finish(reject, new SandboxError(`${what}: creation aborted`, "state"));
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    if (Number.isFinite(timeoutMs) && timeoutMs > 0)
      timer = setTimeout(() => finish(reject, new SandboxError(`${what}: creation timed out after ${timeoutMs}ms`, "timeout")), timeoutMs);
    promise.then(
      (value) => finish(resolve, value),
      (error) => finish(reject, error),
    );
  });
}

function ignoreNotFound(error) {
  if (!(error instanceof SandboxError && error.code === "not_found")) throw error;
}
function requireRecord(value, field) {
  if (!value || typeof value !== "object" || Array.isArray(value)) invalid(`${field} must be an object.`);
  return value;
}
function asRecord(value) {
  return value && typeof value === "object" && !Array.isArray(value) ? value : {};
}
function normalizeStringRecord(value, field) {
  if (value === undefined) return undefined;
  const source = requireRecord(value, field);
  const out = {};
  for (const [key, entry] of Object.entries(source)) {
    if (typeof entry !== "string") invalid(`${field} values must be strings.`, { key });
    out[key] = entry;
  }
  return out;
}
function pickString(value) {
  return typeof value === "string" && value.trim().length > 0 ? value.trim() : undefined;
}
function messageOf(error) {
  return error instanceof Error ? error.message : String(error);
}
function pathsOverlap(left, right) {
  const a = left.replace(/\/+$/g, "") || "/";
  const b = right.replace(/\/+$/g, "") || "/";
  return a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`);
}
function isAbsoluteGuestPath(value) {
  return typeof value === "string" && value.startsWith("/") && !value.includes("\0");
}
function validatePositiveInteger(value, field) {
  if (value !== undefined && (!Number.isInteger(value) || value <= 0)) invalid(`nook ${field} must be a positive integer.`);
}
function validatePositiveNumber(value, field) {
  if (value !== undefined && (typeof value !== "number" || !Number.isFinite(value) || value <= 0))
    invalid(`nook ${field} must be a positive number.`);
}
function validateNonNegativeNumber(value, field) {
  if (value !== undefined && (typeof value !== "number" || !Number.isFinite(value) || value < 0))
    invalid(`nook ${field} must be a non-negative number.`);
}
function invalid(message, details = {}) {
  throw new SmithersError("INVALID_INPUT", message, details);
}

module.exports = {
  NOOK_PROVIDER_ID,
  createNookSandboxProvider,
  registerNookSandboxProvider,
  // exported for unit tests of the prop mapping
  SMITHERS_NAME_LABEL,
  __internals: { buildSpec, egressProxyRules, splitSetupFiles, normalizeCpuCount, normalizeMemoryMib, sanitizeSandboxName, smithersSandboxName, splitSecretEnv, resolveSandboxName },
};
