// SPDX-License-Identifier: Apache-2.0
import type { SandboxProvider, SandboxProviderRequest } from "@smithers-orchestrator/sandbox";
import type { EgressSpec, Sandboxes, SandboxSpec, SecretSpec } from "./index";

export declare const NOOK_PROVIDER_ID: "nook";
/** The label that holds a sandbox's Smithers name as given (case kept, up to 128 bytes); the
 * nook name is derived from it (lowercase, at most 63 bytes, a hash when changed). */
export declare const SMITHERS_NAME_LABEL: "smithers.sandboxName";

export type NookSetupFile = string | Uint8Array;

export interface NookSandboxProviderOptions {
  /** Provider id. Defaults to "nook". */
  id?: string;
  /** Entry command; wins over <Sandbox command>. Default: node /workspace/run-smithers-sandbox.js */
  command?: string;
  /** Guest working directory, created after boot. Default /workspace. */
  workdir?: string;
  /** Extra per-command env; secret-looking keys go as secretEnv (never persisted). */
  env?: Record<string, string>;
  /** "keep" (as microsandbox): the sandbox stays, running and not ephemeral. */
  cleanup?: "destroy" | "keep";
  /** Guest shell for the command (run as SHELL -lc COMMAND). Default /bin/sh. */
  shell?: string;
  /** nook state root (default $NOOK_HOME or nook's default), or a Sandboxes to use. */
  home?: string;
  sandboxes?: Sandboxes;
  /** "host" (default), a root filesystem directory, or an image reference. */
  image?: string;
  /** Boot from a nook snapshot (name or digest; box.snapshot() / `nook snapshot create`) instead
   * of an image; the <Sandbox workspace.snapshotId> prop wins.  Missing: SandboxError not_found. */
  snapshot?: string;
  /** Start each <Sandbox> as a branch (`nook branch`) of this kept sandbox: its root layer and
   * workspace, copy-on-write, and its spec (image, resources, network): this provider's image and
   * resource options do not apply.  A per-sandbox `config.branchFrom` wins.  A stopped source's
   * branch is started.  Missing source: not_found; a taken name: exists. */
  branchFrom?: string;
  sandboxName?: string | ((request: SandboxProviderRequest) => string);
  /** Whole CPUs. */
  cpus?: number;
  maxCpus?: number;
  memoryMib?: number;
  maxMemoryMib?: number;
  security?: "default" | "restricted";
  pullPolicy?: "always" | "if-missing" | "never";
  labels?: Record<string, string>;
  scripts?: Record<string, string>;
  /** Secrets by placeholder (nook's egress gateway; needs allowNetwork): the guest sees a
   * placeholder, requests to the secret's hosts carry the value. */
  secrets?: Record<string, SecretSpec>;
  /** HTTP rules, an upstream CA, audit only (needs allowNetwork). */
  egress?: EgressSpec;
  /** By absolute guest path: under /workspace written after boot, elsewhere by libnook at create. */
  setupFiles?: Record<string, NookSetupFile>;
  maxDurationSecs?: number;
  idleTimeoutSecs?: number;
  /** false keeps the writable root layer (nook persistence "sticky"); default: cleanup !== "keep". */
  ephemeral?: boolean;
  /** Accepted for compatibility: nook sandboxes always run detached from the caller. */
  detached?: boolean;
  replaceExisting?: boolean;
  replaceTimeoutMs?: number;
  stopTimeoutMs?: number;
  creationTimeoutMs?: number;
  /** Escape hatch: adjust (or return a replacement for) the nook spec before create. */
  configure?: (spec: SandboxSpec, request: SandboxProviderRequest) => SandboxSpec | void;
}

/** Creation failures reach Smithers as SmithersError SANDBOX_EXECUTION_FAILED (libnook's
 * SandboxError as cause), bad props as INVALID_INPUT (ports without allowNetwork among them). */
export declare function createNookSandboxProvider(options?: NookSandboxProviderOptions): SandboxProvider;
/** Registers in the application's Smithers registry (Node >= 20.19 or Bun); returns the unregister function. */
export declare function registerNookSandboxProvider(options?: NookSandboxProviderOptions): () => void;
