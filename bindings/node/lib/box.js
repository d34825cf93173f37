// SPDX-License-Identifier: Apache-2.0
"use strict";
// Box: one sandbox.  File calls are host reads and writes on the workspace through libnook
// (every path rule lives there); exec's pipes are read and written by the addon (lib: streams).
const os = require("node:os");
const { PassThrough, Readable, Writable, finished } = require("node:stream");
const addon = require("./binding.js");
const { SandboxError } = require("./errors.js");
const { checkOptions } = require("./options.js");

const DEFAULT_MAX_OUTPUT_BYTES = 10 * 1024 * 1024;
// After the exit status arrives, output still in a pipe is read until the pipe has been quiet
// this long: a background process may hold the pipe open for ever, and we must not wait for it.
const DRAIN_QUIET_MS = 20;
const DRAIN_MAX_MS = 2000;

const SIGNAL_NAMES = Object.fromEntries(Object.entries(os.constants.signals).map(([name, num]) => [num, name]));

function toBuffer(data, what) {
  if (Buffer.isBuffer(data)) return data;
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  throw new SandboxError(`${what}: data must be a string, Buffer, TypedArray or ArrayBuffer`, "invalid");
}

function envList(env, what) {
  if (env === undefined || env === null) return undefined;
  if (typeof env !== "object" || Array.isArray(env))
    throw new SandboxError(`exec: ${what} must be an object of strings`, "invalid");
  const out = [];
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined || value === null) continue;
    // libnook takes "NAME=value" strings and checks the part before the first '=': a key that
    // itself holds '=' or a newline would be split there ({"PATH=/evil:": "x"} sets PATH), so
    // the key is checked here, where it is still separate, with libnook's rule
    // (env_name_is_valid).  The value is never echoed (it may be a secret).
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key))
      throw new SandboxError(`exec: ${what} name ${JSON.stringify(key)} must match [A-Za-z_][A-Za-z0-9_]*`, "invalid");
    if (typeof value !== "string") throw new SandboxError(`exec: ${what} '${key}' must be a string`, "invalid");
    out.push(`${key}=${value}`);
  }
  return out;
}

function isEnded(stream) {
  return stream.readableEnded || stream.destroyed;
}

// Resolves once the stream ended, or once it has been quiet for DRAIN_QUIET_MS after the
// command's exit (then it is destroyed: what a background process writes later is not ours).
// `inPipe`: bytes the pipe still held when the exit was reported (the stream was paused by its
// reader).  Those and the bytes the stream buffers were written by the command itself: they
// are waited for, however long the reader takes.
function drain(stream, inPipe = 0) {
  return new Promise((resolve) => {
    if (isEnded(stream)) return resolve();
    let owed = inPipe + stream.readableLength;
    let quiet;
    let hard;
    const arm = (chunk) => {
      if (chunk) owed -= chunk.length;
      if (owed > 0) return;
      hard ??= setTimeout(finish, DRAIN_MAX_MS);
      clearTimeout(quiet);
      quiet = setTimeout(finish, DRAIN_QUIET_MS);
    };
    function finish() {
      clearTimeout(quiet);
      clearTimeout(hard);
      stream.off("data", arm);
      stream.off("end", finish);
      stream.off("close", finish);
      if (!stream.destroyed) stream.destroy();
      resolve();
    }
    stream.on("data", arm);
    stream.once("end", finish);
    stream.once("close", finish);
    arm();
  });
}

function drainBoth(run, raw) {
  const owed = raw.pending ?? [0, 0];
  return Promise.all([drain(run.stdout, owed[0]), drain(run.stderr, owed[1])]);
}

// exec's stdin option: a stream is piped (and unpiped, never destroyed, once the command closed
// its stdin: an endless source then stops being read); data is written and ended.  checkStdin
// runs before the command starts, so a bad value starts nothing.
function isStream(input) {
  return input instanceof Readable || (typeof input?.pipe === "function" && typeof input.unpipe === "function");
}

function checkStdin(input) {
  if (!isStream(input)) return toBuffer(input, "exec: stdin");
  // piped from, it would never end the command's stdin: the command would wait for ever
  if (input.readableErrored || (input.destroyed && !input.readableEnded))
    throw new SandboxError("exec: stdin: the stream is already destroyed or failed", "invalid");
  return input;
}

// onError(err): the source stream failed; the command is killed and the exec rejects with it.
function feedStdin(sink, input, onError) {
  sink.on("error", () => {});
  if (isStream(input)) {
    // an error once the command closed its stdin (or the exec ended) concerns nobody: ignored,
    // and still listened to, so that it is no uncaught exception of the caller's
    input.on("error", () => {});
    // finished: an error, or a destroy before the end ("premature close"), which pipe() does not
    // pass on: the command would wait for the rest of its input for ever
    // The command is killed (onError) with its stdin still open: closing it first would let the
    // command see EOF and act on the truncated input before the kill reaches it.
    finished(input, { writable: false }, (err) => {
      if (!err || sink.destroyed) return;
      input.unpipe(sink);
      onError(err);
    });
    input.pipe(sink);
  } else {
    sink.end(input);
  }
  return sink;
}

// The source of exec's stdin failed mid-way: the command saw part of its input, so it was killed
// rather than left to act on a truncated one.
function stdinFailed(err) {
  const what = err?.code === "ERR_STREAM_PREMATURE_CLOSE" ? "was destroyed before its end" : `failed (${err?.message ?? err})`;
  return new SandboxError(`exec: the stdin stream ${what}; the command was killed`, "io", {
    cause: err,
  });
}

// index.d.ts's ExecOptions; spawn's are those without the three of exec's captured output
const SPAWN_OPTIONS = ["env", "secretEnv", "cwd", "user", "timeoutMs", "signal", "stdin"];
const EXEC_OPTIONS = [...SPAWN_OPTIONS, "onStdout", "onStderr", "maxOutputBytes"];
// An option exec (or spawn) does not know is refused (lib/options.js): a typo (`timeout`) must
// not mean "no timeout", and spawn has no captured output for onStdout and the like to apply to.
// The values are checked where they are used (execRequest, checkStdin, exec).
function checkExecOptions(opts, known, what) {
  if (opts !== null && typeof opts === "object")
    for (const key of Object.keys(opts))
      if (!known.includes(key) && EXEC_OPTIONS.includes(key))
        throw new SandboxError(`${what}: option '${key}' is exec's only: read the process's stdout and stderr streams`, "invalid");
  checkOptions(opts, Object.fromEntries(known.map((k) => [k, null])), what);
}

function execRequest(cmd, opts) {
  const req = {};
  if (typeof cmd === "string") {
    if (cmd.length === 0) throw new SandboxError("exec: give a command (argv) or a shell string", "invalid");
    req.shell = cmd;
  } else if (Array.isArray(cmd)) {
    if (cmd.length === 0 || cmd.some((a) => typeof a !== "string"))
      throw new SandboxError("exec: argv must be a non-empty array of strings", "invalid");
    req.argv = cmd;
  } else {
    throw new SandboxError("exec: the command must be a shell string or an argv array", "invalid");
  }
  req.env = envList(opts.env, "env");
  req.secretEnv = envList(opts.secretEnv, "secretEnv");
  if (opts.cwd !== undefined) req.cwd = opts.cwd;
  if (opts.user !== undefined) req.user = String(opts.user);
  if (opts.timeoutMs !== undefined) {
    if (typeof opts.timeoutMs !== "number" || !(opts.timeoutMs >= 0))
      throw new SandboxError("exec: timeoutMs must be a non-negative number", "invalid");
    req.timeoutMs = Math.ceil(opts.timeoutMs);
  }
  req.stdin = opts.stdin !== undefined && opts.stdin !== null;
  return req;
}

function shapeResult(raw) {
  return {
    exitCode: raw.exitCode,
    signal: raw.signal ? (SIGNAL_NAMES[raw.signal] ?? raw.signal) : null,
    reason: raw.reason,
  };
}

// The command's stdio as streams over the addon's exec calls.  The addon reads and writes the
// pipes on the JS thread as they become ready (the same under Node and Bun; no stream of the
// runtime's own touches a pipe); a stream whose buffer is full pauses its pipe until read.
function execStreams(req) {
  let handle = null;
  let closed = false;
  let stdinCallback = null;
  const outputs = [0, 1].map(
    (which) =>
      new Readable({
        highWaterMark: 64 * 1024,
        read() {
          if (handle && !closed) addon.execResume(handle, which);
        },
        destroy(err, callback) {
          if (handle && !closed) addon.execClosePipe(handle, which);
          callback(err);
        },
      }),
  );
  // the command closed its stdin (or ended): what was written is dropped, and the stream is
  // destroyed, so a source piped into it is unpiped ('close') instead of spinning on writes
  const stdinGone = () => {
    if (stdin && !stdin.destroyed) stdin.destroy();
  };
  const stdin = req.stdin
    ? new Writable({
        write(chunk, _encoding, callback) {
          const r = closed ? -1 : addon.execWrite(handle, chunk);
          if (r === 0) {
            stdinCallback = callback;
            return;
          }
          callback();
          if (r < 0) stdinGone();
        },
        final(callback) {
          if (!closed) addon.execEndStdin(handle);
          callback();
        },
        destroy(err, callback) {
          if (!closed && handle) addon.execEndStdin(handle);
          callback(err);
        },
      })
    : null;
  const drained = () => {
    const cb = stdinCallback;
    stdinCallback = null;
    if (cb) cb();
  };
  let settle;
  const done = new Promise((resolve, reject) => {
    settle = { resolve, reject };
  });
  const onEvent = (kind, value) => {
    switch (kind) {
      case "stdout":
        return outputs[0].push(value);
      case "stderr":
        return outputs[1].push(value);
      case "stdout-end":
        outputs[0].push(null);
        break;
      case "stderr-end":
        outputs[1].push(null);
        break;
      case "stdin-drain":
        drained();
        break;
      case "stdin-closed":
        drained();
        stdinGone();
        break;
      case "exit":
        settle.resolve(value);
        break;
      case "error":
        settle.reject(value);
        break;
      default:
        break;
    }
    return true;
  };
  // Closing stops the pipes (what a background process writes later is not ours) and frees
  // the command's connection; the handle is referenced from onEvent, so it lives until then.
  const close = () => {
    if (closed || !handle) return;
    closed = true;
    addon.execClose(handle);
    drained();
    stdinGone();
    for (const s of outputs) if (!s.readableEnded) s.push(null);
  };
  return {
    stdout: outputs[0],
    stderr: outputs[1],
    stdin,
    done,
    onEvent,
    close,
    setHandle(h) {
      handle = h;
    },
  };
}

// Starts a command: `done` is libnook's exit report; call close() once the output was drained.
function startExec(box, cmd, opts) {
  const req = execRequest(cmd, opts);
  const input = req.stdin ? checkStdin(opts.stdin) : null;
  const signal = opts.signal;
  if (signal !== undefined && signal !== null && typeof signal.addEventListener !== "function")
    throw new SandboxError("exec: signal must be an AbortSignal", "invalid");
  if (signal?.aborted) {
    // aborted before it started: it never starts
    const empty = () => Readable.from([]);
    const done = Promise.resolve({ exitCode: -1, signal: 0, reason: "cancelled" });
    return { handle: null, stdout: empty(), stderr: empty(), stdin: null, done, cancel: () => {}, fail: () => {}, failure: () => null, close: () => {} };
  }
  const io = execStreams(req);
  const handle = addon.execStart(box._sandboxes.home, box.name, req, io.onEvent);
  io.setHandle(handle);
  const cancel = () => {
    try {
      addon.execCancel(handle);
    } catch {
      // the command ended meanwhile
    }
  };
  // a stdin source's error, or what an output callback threw: the command is killed and the
  // exec rejects with it
  let failure = null;
  const fail = (err) => {
    failure ??= err;
    cancel();
  };
  if (req.stdin) feedStdin(io.stdin, input, (err) => fail(stdinFailed(err)));
  if (signal) {
    if (signal.aborted) cancel();
    else signal.addEventListener("abort", cancel, { once: true });
  }
  const done = io.done
    .finally(() => {
      if (signal) signal.removeEventListener("abort", cancel);
    })
    .then((raw) => {
      if (failure) throw failure;
      return raw;
    });
  return { handle, stdout: io.stdout, stderr: io.stderr, stdin: io.stdin, done, cancel, fail, failure: () => failure, close: io.close };
}

// Only this module makes Boxes and ExecProcesses (makeBox, spawn): a constructor called from
// anywhere else, whatever it is given, is refused before it holds anything.
let minting = false;
function mint(make) {
  minting = true;
  try {
    return make();
  } finally {
    minting = false;
  }
}

class ExecProcess {
  constructor(run) {
    if (!minting || typeof run?.done?.then !== "function")
      throw new SandboxError("An ExecProcess comes from box.spawn()", "invalid");
    this._run = run;
    this.stdout = new PassThrough();
    this.stderr = new PassThrough();
    this.stdin = run.stdin;
    for (const [src, dst] of [
      [run.stdout, this.stdout],
      [run.stderr, this.stderr],
    ]) {
      src.on("error", (err) => dst.destroy(err));
      // a reader that gave its stream up is owed nothing more (wait() must not wait for it)
      dst.once("close", () => src.destroy());
      src.pipe(dst, { end: false });
    }
    this._wait = run.done.then(
      async (raw) => {
        await drainBoth(run, raw);
        run.close();
        this.stdout.end();
        this.stderr.end();
        return shapeResult(raw);
      },
      (err) => {
        run.close();
        run.stdout.destroy();
        run.stderr.destroy();
        this.stdout.end();
        this.stderr.end();
        throw err;
      },
    );
    this._wait.catch(() => {}); // reported through wait(); no unhandled rejection
  }

  /** Resolves with { exitCode, signal, reason } once the command ended and its output was read. */
  wait() {
    return this._wait;
  }

  /** Kills the command's whole process tree inside the sandbox. */
  kill() {
    this._run.cancel();
  }
}

// A workspace path: a string, and well-formed UTF-16 (a lone surrogate would reach the file system
// as U+FFFD, another name than the one given).
function checkPath(path, what) {
  if (typeof path !== "string")
    throw new SandboxError(`${what}: the path must be a string, not ${path === null ? "null" : typeof path}`, "invalid");
  if (typeof path.isWellFormed === "function" && !path.isWellFormed())
    throw new SandboxError(`${what}: the path ${JSON.stringify(path)} holds a lone UTF-16 surrogate, which names no file`, "invalid");
  return path;
}

class Box {
  constructor(sandboxes, name, ws) {
    if (!minting || typeof sandboxes?.home !== "string" || typeof name !== "string" || ws === undefined)
      throw new SandboxError("A Box comes from a Sandboxes object: create(), get() or branch()", "invalid");
    this._sandboxes = sandboxes;
    this._ws = ws;
    this.name = name;
  }

  /** The host directory bind-mounted at /workspace. */
  get workspaceDir() {
    return addon.wsRoot(this._ws);
  }

  async writeFile(path, data, options) {
    const o = checkOptions(options, { inPlace: "boolean" }, "writeFile");
    return addon.wsWrite(this._ws, checkPath(path, "writeFile"), toBuffer(data, "writeFile"), o.inPlace === true);
  }

  /** The file's bytes as a Buffer, or a string when an encoding is given. */
  async readFile(path, options) {
    const o = typeof options === "string" ? { encoding: options } : checkOptions(options, { encoding: "string", maxBytes: "positive integer" }, "readFile");
    const encoding = o.encoding;
    if (encoding !== undefined && !Buffer.isEncoding(encoding))
      throw new SandboxError(`readFile: unknown encoding ${JSON.stringify(encoding)}`, "invalid");
    const max = o.maxBytes ?? 0;
    const buf = await addon.wsRead(this._ws, checkPath(path, "readFile"), max);
    return encoding ? buf.toString(encoding) : buf;
  }

  /** mkdir -p of a workspace path (a host operation, same path rule). */
  async mkdir(path) {
    return addon.wsMkdir(this._ws, checkPath(path, "mkdir"));
  }

  /** Synchronous; never reads the file. */
  exists(path) {
    return addon.wsExists(this._ws, checkPath(path, "exists"));
  }

  /** The absolute host path of a guest path, under the workspace rule; throws SandboxError refused. */
  hostPath(path) {
    return addon.wsHostPath(this._ws, checkPath(path, "hostPath"));
  }

  /**
   * Runs a command: a string runs as `/bin/sh -lc CMD`, an array is argv.  Resolves with
   * { exitCode, signal, stdout, stderr, reason, truncated } whatever the exit code; rejects only
   * when the command could not run (SandboxError).
   */
  async exec(cmd, opts = {}) {
    checkExecOptions(opts, EXEC_OPTIONS, "exec");
    const max = opts.maxOutputBytes === undefined ? DEFAULT_MAX_OUTPUT_BYTES : opts.maxOutputBytes;
    if (typeof max !== "number" || !(max >= 0))
      throw new SandboxError("exec: maxOutputBytes must be a non-negative number", "invalid");
    for (const key of ["onStdout", "onStderr"])
      if (opts[key] !== undefined && typeof opts[key] !== "function")
        throw new SandboxError(`exec: ${key} must be a function (called with each chunk), not ${typeof opts[key]}`, "invalid");
    const run = startExec(this, cmd, opts);
    let truncated = false;
    const capture = (stream, onChunk, what) => {
      const chunks = [];
      let kept = 0;
      stream.on("data", (chunk) => {
        const whole = chunk;
        if (kept >= max) truncated = true;
        else {
          if (kept + chunk.length > max) {
            chunk = chunk.subarray(0, max - kept);
            truncated = true;
          }
          kept += chunk.length;
          chunks.push(chunk);
        }
        // a callback that throws ends the exec: the command is killed and exec rejects with it
        // (it must not become the process's uncaught exception, nor lose the chunk)
        if (onChunk && !callbackFailed) {
          try {
            onChunk(whole);
          } catch (e) {
            callbackFailed = true;
            run.fail(e instanceof Error ? e : new SandboxError(`exec: ${what} threw ${String(e)}`, "invalid"));
          }
        }
      });
      stream.on("error", () => {});
      return chunks;
    };
    let callbackFailed = false;
    const out = capture(run.stdout, opts.onStdout, "onStdout");
    const err = capture(run.stderr, opts.onStderr, "onStderr");
    let raw;
    try {
      raw = await run.done;
    } catch (e) {
      run.close();
      run.stdout.destroy();
      run.stderr.destroy();
      throw e;
    }
    await drainBoth(run, raw);
    run.close();
    // a callback that threw on output read after the exit report (the drain)
    if (run.failure()) throw run.failure();
    return {
      ...shapeResult(raw),
      stdout: Buffer.concat(out).toString("utf8"),
      stderr: Buffer.concat(err).toString("utf8"),
      truncated,
    };
  }

  /** Streaming exec: { stdout, stderr (Readable), stdin (Writable | null), wait(), kill() }. */
  spawn(cmd, opts = {}) {
    checkExecOptions(opts, SPAWN_OPTIONS, "spawn");
    const run = startExec(this, cmd, opts);
    return mint(() => new ExecProcess(run));
  }

  /** The egress gateway's audit log so far: one object per request (time, sandbox, method, host,
   * path, status, decision, rule, reason, bytesUp, bytesDown, proto); [] without a gateway. */
  async egressLog() {
    return JSON.parse(await addon.egressLog(this._sandboxes.home, this.name));
  }

  /** Sandbox state as libnook reports it (nook inspect). */
  async inspect() {
    return JSON.parse(await addon.inspect(this._sandboxes.home, this.name));
  }

  /** Starts a stopped sandbox again from its stored spec. */
  async start() {
    await addon.start(this._sandboxes.home, this.name);
  }

  /** Stops the sandbox; the workspace stays. */
  async stop(options) {
    await this._sandboxes.stop(this.name, options);
  }

  /**
   * Freezes every process of the sandbox (cgroup freezer).  While paused, exec rejects with
   * SandboxError code state naming resume; workspace files stay readable and writable (host
   * files); the idle timer stands still, the maximum duration keeps counting.
   */
  async pause() {
    await addon.pause(this._sandboxes.home, this.name);
  }

  /** Thaws a paused sandbox: its processes continue where they were. */
  async resume() {
    await addon.resume(this._sandboxes.home, this.name);
  }

  /**
   * Snapshots the disk state of this sandbox (stopped and sticky; libnook refuses the rest with
   * SandboxError code state) as `name` (undefined/null: "<sandbox>-<epoch seconds>").
   * { withWorkspace: true } includes the workspace.  Resolves with libnook's snapshot object
   * ({ name, digest, base, parent, withWorkspace, sourceSandbox, createdAt, rootfsSize, ... });
   * without a name, content a snapshot holds already resolves with that one (alreadyPresent:
   * true).  A name that is taken, or content held under another name, rejects with code exists.
   */
  async snapshot(name, options) {
    const o = checkOptions(options, { withWorkspace: "boolean" }, "snapshot");
    const flags = o.withWorkspace ? addon.SNAPSHOT_WITH_WORKSPACE : 0;
    return JSON.parse(await addon.snapshotCreate(this._sandboxes.home, this.name, name ?? null, flags));
  }

  /**
   * The workspace's changes since the baseline (create, or the branch point): resolves with
   * libnook's diff object { sandbox, scope, changes: [{ path, kind, type, mode, ... }], summary }
   * (docs/design/diff-merge.md).  { patch: true } adds a unified diff per changed text file;
   * { root: true } lists the writable root layer's changes instead.
   */
  async diff(options) {
    const o = checkOptions(options, { patch: "boolean", root: "boolean" }, "diff");
    const flags = (o.patch ? addon.DIFF_PATCH : 0) | (o.root ? addon.DIFF_ROOT : 0);
    return JSON.parse(await addon.diff(this._sandboxes.home, this.name, flags));
  }

  /**
   * Applies this sandbox's workspace changes since its baseline onto another sandbox's workspace:
   * { into, strategy: "refuse" | "ours" | "theirs", dryRun }.  Resolves with the report
   * { branch, into, strategy, dryRun, merged, applied, conflicts }.  With conflicts and strategy
   * "refuse" nothing changes and it rejects with SandboxError code "conflict" whose
   * .conflicts lists them.
   */
  async merge(options) {
    options = checkOptions(options, { into: "string", strategy: "string", dryRun: "boolean" }, "merge");
    const o = {};
    if (options.into !== undefined) o.into = options.into;
    if (options.strategy !== undefined) o.strategy = options.strategy;
    if (options.dryRun !== undefined) o.dryRun = options.dryRun;
    try {
      return JSON.parse(await addon.merge(this._sandboxes.home, this.name, JSON.stringify(o)));
    } catch (e) {
      if (e && typeof e.report === "string") {
        const report = JSON.parse(e.report);
        delete e.report;
        e.conflicts = report.conflicts;
      }
      throw e;
    }
  }
}

/** The one way to a Box (sandboxes.js: create, get, branch). */
function makeBox(sandboxes, name, ws) {
  return mint(() => new Box(sandboxes, name, ws));
}

module.exports = { Box, ExecProcess, makeBox };
