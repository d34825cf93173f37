// SPDX-License-Identifier: Apache-2.0
/// <reference types="node" />
import type { Readable, Writable } from "node:stream";

/** libnook's error codes (nook_errc_to_string). */
export type SandboxErrorCode =
  | "invalid" | "refused" | "not_found" | "exists" | "state" | "missing_feature"
  | "timeout" | "io" | "nomem" | "busy" | "internal" | "conflict" | (string & {});

export declare class SandboxError extends Error {
  constructor(message: string, code: SandboxErrorCode, options?: { cause?: unknown });
  readonly name: "SandboxError";
  /** libnook's error code. */
  code: SandboxErrorCode;
  /** The system call's errno, when the failure came from one (not every one carries it: a
   * missing file is code "not_found" without it). */
  errno?: number;
  /** A merge refused for conflicts (code "conflict"): every conflicting path. */
  conflicts?: MergeConflict[];
}

/** A setup file of the spec: text, or bytes as base64; mode 0..0o777. */
export type SetupFile = string | { content: string; mode?: number } | { base64: string; mode?: number };

/** A volume: a host directory (bind, read-only unless readonly: false), a tmpfs, or a named
 * nook volume.  Targets are absolute guest paths other than /workspace. */
export type VolumeSpec =
  | { type?: "bind"; source: string; target: string; readonly?: boolean; allowSensitive?: boolean }
  | { type: "tmpfs"; target: string; sizeMib?: number; readonly?: boolean }
  | { type?: "volume"; name: string; target: string; readonly?: boolean };

/** network "policy": allow/deny rules by CIDR (and ports), and domain names to allow.  With
 * network "public": rules only, as exceptions to its public-only floor (domains are refused). */
export interface NetworkPolicy {
  rules?: Array<{ action: "allow" | "deny"; cidr: string; ports?: string }>;
  domains?: string[];
}

/** A secret kept out of the guest: the guest's env NAME holds a placeholder ("nook-ph-" + 32 hex),
 * which nook's egress gateway replaces by value in HTTPS requests to hosts only (in headers and
 * the request line; in bodies too with body: true).  Never stored: a sticky sandbox started again
 * later has no value, and its placeholder is blocked. */
export interface SecretSpec {
  value: string;
  /** "api.example.com" or "*.example.com" (any name below). */
  hosts: string[];
  body?: boolean;
}

/** The egress gateway's HTTP rules and options (needs network "public" or "policy"). */
export interface EgressSpec {
  /** "METHOD URL-GLOB" ("GET https://api.github.com/repos/*"); non-empty = default deny (403). */
  allowHttp?: string[];
  /** A PEM CA certificate the gateway trusts for upstream servers (a private CA). */
  ca?: string;
  /** Run the gateway for its audit log only. */
  audit?: boolean;
}

/** One line of the egress gateway's audit log (box.egressLog()). */
export interface EgressLogEntry {
  time: string;
  sandbox: string;
  method: string | null;
  host: string | null;
  path: string | null;
  status: number | null;
  decision: "allow" | "deny" | "block" | "error";
  rule: string | null;
  reason: string | null;
  bytesUp: number;
  bytesDown: number;
  proto: string;
}

/** nook's spec (include/nook.h, src/sandbox/spec.c).  libnook validates it: an unknown field or
 * a bad value is SandboxError invalid. */
export interface SandboxSpec {
  /** "host" (default: the host's /usr read-only), a root filesystem directory, or an image
   * reference ("debian:12") pulled by nook. */
  image?: string;
  /** Boot from a snapshot (name or "sha256:..." digest): its base image, its layer, and its
   * workspace when it has one and this sandbox's workspace is empty.  Missing: not_found. */
  snapshot?: string;
  pullPolicy?: "always" | "if-missing" | "never";
  /** Stored with the sandbox: never put secrets here (use exec's secretEnv). */
  env?: Record<string, string>;
  labels?: Record<string, string>;
  persistence?: "ephemeral" | "sticky";
  maxDurationSecs?: number;
  idleTimeoutSecs?: number;
  security?: "default" | "restricted";
  network?: "off" | "public" | "policy";
  /** With network "policy", or "public" (rules only). */
  networkPolicy?: NetworkPolicy;
  /** Published TCP ports, "[ADDR:]HOSTPORT:PORT[/tcp]" (ADDR IPv4, default 127.0.0.1), e.g.
   * "18091:80".  Needs network "public" or "policy". */
  ports?: string[];
  volumes?: VolumeSpec[];
  workdir?: string;
  /** The default user of every exec (name or uid[:gid]).  /workspace and the files written
   * through the API belong to the sandbox's root (mode 0755/0644): another user reads them and
   * writes only where a chmod or chown (run as root) lets it, as with a docker bind mount. */
  user?: string;
  /** Whole CPUs (fractions round up); a number or a string; at most the host's CPUs (invalid above,
   * at create and update). */
  cpus?: number | string;
  maxCpus?: number | string;
  /** MiB, or a size string ("512m", "2g"). */
  memoryMib?: number | string;
  /** Same as memoryMib (give one of the two). */
  memory?: number | string;
  maxMemoryMib?: number | string;
  /** Processes and threads; without it 2048 where nook has a cgroup (podman's default); 0: no
   * limit.  The egress gateway (secrets, egress rules or audit) runs in the sandbox's cgroup: it
   * counts too (one, and a thread per connection through it), and the cpu and memory limits bound
   * it as well. */
  pidsMax?: number;
  /** Scripts placed in the sandbox, by name (letters, digits, '_', '-', '.'). */
  scripts?: Record<string, string>;
  /** Files written into the root filesystem at create, by absolute guest path. */
  setupFiles?: Record<string, SetupFile>;
  /** Secrets by placeholder, by env name (needs network "public" or "policy"). */
  secrets?: Record<string, SecretSpec>;
  egress?: EgressSpec;
}

/** One change of nook_diff (docs/design/diff-merge.md). */
export interface DiffChange {
  /** Relative to the workspace (or the root layer); escaped as %XX when pathEscaped. */
  path: string;
  kind: "added" | "deleted" | "modified" | "type" | "mode";
  type: "file" | "dir" | "symlink" | "other" | "whiteout";
  /** Octal permission bits, "0644". */
  mode?: string;
  size?: number;
  target?: string;
  oldType?: string;
  oldMode?: string;
  oldTarget?: string;
  patch?: string;
  pathEscaped?: boolean;
  /** target (a symlink's) is not UTF-8: bytes >= 0x80 and "%" are %XX in it. */
  targetEscaped?: boolean;
  whiteout?: boolean;
  opaque?: boolean;
}

export interface DiffResult {
  sandbox: string;
  scope: "workspace" | "root";
  changes: DiffChange[];
  summary: { added: number; deleted: number; modified: number; type: number; mode: number };
}

export interface MergeOptions {
  /** The target sandbox; default: the branch's source (required for a sandbox that is not a branch). */
  into?: string;
  strategy?: "refuse" | "ours" | "theirs";
  dryRun?: boolean;
}

export interface MergeConflict {
  /** Escaped as %XX when pathEscaped (a name that is not UTF-8). */
  path: string;
  pathEscaped?: boolean;
  branch: DiffChange["kind"];
  target: "added" | "deleted" | "modified" | "type" | "mode" | "parent" | "entries";
  resolution: "refused" | "ours" | "theirs" | "skipped";
}

export interface MergeResult {
  branch: string;
  into: string;
  strategy: "refuse" | "ours" | "theirs";
  dryRun: boolean;
  merged: boolean;
  applied: Array<{ path: string; pathEscaped?: boolean; kind: DiffChange["kind"] }>;
  conflicts: MergeConflict[];
}

/** libnook's snapshot JSON (nook.h, snapshots). */
export interface SnapshotInfo {
  name: string;
  /** "sha256:..." */
  digest: string;
  /** The image the snapshot's sandbox was booted from. */
  base: string;
  baseDigest?: string | null;
  /** The snapshot that sandbox booted from, or null. */
  parent: string | null;
  withWorkspace: boolean;
  /** Human-readable: "root filesystem" or "root filesystem and workspace". */
  holds?: string;
  sourceSandbox: string;
  createdAt: number;
  rootfsSize: number;
  workspaceSize: number | null;
  path: string;
  /** The sandboxes whose spec boots from it (filled by inspectSnapshot). */
  /** Who boots from it (ls and inspect). */
  usedBy?: Array<{ sandbox: string; [key: string]: unknown }>;
  note?: string;
  /** True when nothing new was stored: a snapshot without a name, or an import, of content this
   * snapshot holds already (content is stored once, under one name). */
  alreadyPresent?: boolean;
  [key: string]: unknown;
}

export interface SandboxInfo {
  name: string;
  state: "creating" | "running" | "paused" | "stopped" | (string & {});
  image: string | null;
  /** The image's manifest digest ("sha256:..."), null for "host" and directories. */
  imageDigest: string | null;
  /** The stored spec, normalized by libnook. */
  spec: Record<string, unknown>;
  labels: Record<string, string>;
  persistence: "ephemeral" | "sticky";
  /** Seconds since the epoch. */
  createdAt: number;
  startedAt: number | null;
  stoppedAt: number | null;
  stopReason: string | null;
  /** The workspace's host directory. */
  workspace: string | null;
  supervisorPid: number | null;
  /** A branch's source sandbox (nook branch), null otherwise. */
  branchOf: string | null;
  /** When the branch was made: RFC 3339 UTC with milliseconds; null when not a branch. */
  branchPoint: string | null;
  /** A stopped sandbox whose `nook run -d` or `nook run --keep` command ended (by itself or by
   * stop): its exit status, 128 + the signal when killed; absent otherwise. */
  exitCode?: number;
  /** The egress gateway of a running sandbox with secrets, HTTP rules or the audit (absent
   * otherwise), as its supervisor tells it. */
  egress?: EgressInfo;
}

export interface EgressInfo {
  /** "restarting": it died and a new one starts (100 ms, doubled per restart); "failed": given up
   * after 5 restarts within a minute, the sandbox's HTTP and HTTPS are refused until it is stopped
   * and started again; "unknown": the supervisor did not answer (`reason` says why). */
  state: "running" | "restarting" | "failed" | "unknown";
  /** Restarts since the sandbox started. */
  restarts?: number;
  /** The gateway's host pid while it runs. */
  pid?: number;
  /** How the last gateway ended: "killed by signal 9", "exited with status 1", or why it did not
   * start. */
  lastExit?: string;
  reason?: string;
}

/** An option not listed here is refused (SandboxError "invalid", naming it): a typo such as
 * `timeout` must not silently mean no timeout. */
export interface ExecOptions {
  /** Per-command environment (over the sandbox's). */
  env?: Record<string, string>;
  /** Per-command secrets: never stored, logged or put in an argv on the host. */
  secretEnv?: Record<string, string>;
  /** An absolute path in the guest (default the sandbox's workdir, /workspace). */
  cwd?: string;
  user?: string | number;
  /** libnook kills the command's whole process tree when this passes (reason "timeout"). */
  timeoutMs?: number;
  /** Aborting kills the command's whole process tree (reason "cancelled"). */
  signal?: AbortSignal;
  /** Data (written, then EOF) or a Readable (piped until the command closes its stdin). */
  stdin?: string | Buffer | ArrayBufferView | ArrayBuffer | Readable;
  onStdout?: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
  /** Cap on captured bytes per stream (default 10 MiB); the rest is dropped and truncated set. */
  maxOutputBytes?: number;
}

export interface ExecExit {
  /** 0-255, or -1 when a signal ended the command. */
  exitCode: number;
  /** The terminating signal's name ("SIGKILL"), or null. */
  signal: string | null;
  /** "stopped": the sandbox stopped (or was removed) while the command ran; "oom": its memory
   * limit killed it. */
  reason: "exited" | "timeout" | "cancelled" | "stopped" | "oom" | string;
}

export interface ExecResult extends ExecExit {
  stdout: string;
  stderr: string;
  truncated: boolean;
}

/** Made by box.spawn() only. */
export declare class ExecProcess {
  private constructor();
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Present when ExecOptions.stdin was given (it is fed from there). */
  readonly stdin: Writable | null;
  wait(): Promise<ExecExit>;
  /** Kills the command's whole process tree. */
  kill(): void;
}

/** Made by Sandboxes' create(), get() and branch() only. */
export declare class Box {
  private constructor();
  readonly name: string;
  /** The host directory bind-mounted at /workspace. */
  readonly workspaceDir: string;
  /** Atomic for readers: they see the old file or the new one, never part of one.  Parents are
   * made.  A new file is mode 0644; a file replaced keeps its permission bits (a script stays
   * executable).  A symlink at the path is replaced by the file, never written through.
   *
   * `inPlace: true` writes into the file itself, as Node's `fs.writeFile` does: an existing
   * regular file keeps its inode (hard links, owner, a program holding it open sees the new
   * bytes) and its permission bits (not set-id ones); a symlink that stays inside the workspace
   * is written through.  Not atomic: a reader may see part of the file.  Anything but a regular
   * file is refused (SandboxError "invalid"). */
  writeFile(path: string, data: string | Buffer | Uint8Array | ArrayBuffer, options?: { inPlace?: boolean }): Promise<void>;
  readFile(path: string): Promise<Buffer>;
  /** maxBytes: a larger file is refused (SandboxError "invalid"), never cut short.  Leaves the
   * file's access time as it was (where the host lets its caller: it owns the file, or is root). */
  readFile(path: string, options: BufferEncoding | { encoding: BufferEncoding; maxBytes?: number }): Promise<string>;
  readFile(path: string, options: { maxBytes?: number }): Promise<Buffer>;
  mkdir(path: string): Promise<void>;
  /** Synchronous, never reads the file. */
  exists(path: string): boolean;
  /** The host path of a workspace path; throws SandboxError refused for one that leaves the
   * workspace ("..", a symlink out).  Every file call takes workspace paths: "/src/x",
   * "src/x" and "/workspace/src/x" are the same file, and "/etc/x" is "/workspace/etc/x" (never
   * the root filesystem's /etc: use exec for that). */
  hostPath(path: string): string;
  /** A string runs with /bin/sh -lc; an array is argv. */
  exec(command: string | string[], options?: ExecOptions): Promise<ExecResult>;
  spawn(command: string | string[], options?: Omit<ExecOptions, "onStdout" | "onStderr" | "maxOutputBytes">): ExecProcess;
  inspect(): Promise<SandboxInfo>;
  /** The egress gateway's audit log so far ([] without a gateway; `nook egress log` says
   * there is none instead). */
  egressLog(): Promise<EgressLogEntry[]>;
  start(): Promise<void>;
  /** timeoutMs: between SIGTERM and SIGKILL; default 10 s, 0 kills at once, at most 1 h. */
  stop(options?: { timeoutMs?: number }): Promise<void>;
  /** Disk state of a stopped sticky sandbox (else SandboxError state); name undefined/null:
   * "<sandbox>-<epoch seconds>" (then "-2", "-3"... within one second), or, when a snapshot holds
   * exactly this content already, that snapshot with alreadyPresent: true.  A name that is taken,
   * or content another name holds, rejects with code exists.  withWorkspace: include the workspace. */
  snapshot(name?: string | null, options?: { withWorkspace?: boolean }): Promise<SnapshotInfo>;
  /** Freezes every process (cgroup freezer); exec rejects with code state until resume(). */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Workspace changes since create or the branch point (patch: unified diffs; root: the
   * writable root layer instead). */
  diff(options?: { patch?: boolean; root?: boolean }): Promise<DiffResult>;
  /** This sandbox's workspace changes onto `into`'s; conflicts with strategy "refuse" (the
   * default) reject with SandboxError code "conflict" and `.conflicts`, changing nothing. */
  merge(options?: MergeOptions): Promise<MergeResult>;
}

/**
 * Every options object of this API (the constructor's, create's, stop's, branch's, readFile's,
 * exec's, snapshot's, diff's, merge's) refuses an option it does not know and a value of the
 * wrong type with SandboxError "invalid" naming it, before anything is done: a typo such as
 * `dryrun` never means "off".
 */
export declare class Sandboxes {
  /** State under home, else $NOOK_HOME, else nook's default root. */
  constructor(options?: { home?: string });
  readonly home: string;
  create(name: string, spec?: SandboxSpec, options?: { replace?: boolean }): Promise<Box>;
  /** A Box for an existing sandbox, or SandboxError not_found. */
  get(name: string): Promise<Box>;
  list(): Promise<SandboxInfo[]>;
  start(name: string): Promise<void>;
  /** timeoutMs: between SIGTERM and SIGKILL; default 10 s, 0 kills at once, at most 1 h. */
  stop(name: string, options?: { timeoutMs?: number }): Promise<void>;
  /** Everything gone, running or not (SandboxError "not_found" for a name with no sandbox). */
  remove(name: string): Promise<void>;
  /** Synchronous; the same path even before create(). */
  workspaceDir(name: string): string;
  /** A new sandbox from src's disk state and workspace (copy-on-write; docs/design/branch.md). */
  branch(src: string, name: string, options?: { count?: undefined }): Promise<Box>;
  /** count (1..100) branches name-1 .. name-N, all or none. */
  branch(src: string, name: string, options: { count: number }): Promise<Box[]>;
  /** Every snapshot, newest first. */
  snapshots(): Promise<SnapshotInfo[]>;
  /** By name or digest; SandboxError not_found. */
  inspectSnapshot(name: string): Promise<SnapshotInfo>;
  /** Refused (busy) while a sandbox boots from it or a snapshot was taken on a sandbox booted from it. */
  removeSnapshot(name: string): Promise<void>;
}

/** libnook's size parser ("512m" -> bytes). */
export declare function parseSize(s: string): number;
/** libnook's duration parser ("1h30m" -> ms). */
export declare function parseDuration(s: string): number;
export declare function version(): string;
