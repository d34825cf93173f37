// SPDX-License-Identifier: Apache-2.0
import type { SandboxProvider, SandboxProviderRequest } from "@smithers-orchestrator/sandbox";
import type { Sandboxes, SandboxSpec } from "./index";

export declare const NOOK_PROVIDER_ID: "nook";

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
  cleanup?: "destroy" | "keep";
  /** Guest shell for the command (run as SHELL -lc COMMAND). Default /bin/sh. */
  shell?: string;
  /** nook state root (default $NOOK_HOME or nook's default), or a Sandboxes to use. */
  home?: string;
  sandboxes?: Sandboxes;
  /** "host" (default) or a root filesystem directory. */
  image?: string;
  /** Boot from a nook snapshot (name or digest; box.snapshot() / `nook snapshot create`) instead
   * of an image; the <Sandbox workspace.snapshotId> prop wins.  Missing: SandboxError not_found. */
  snapshot?: string;
  sandboxName?: string | ((request: SandboxProviderRequest) => string);
  /** Not in nook yet: missing_feature. */
  cpus?: number;
  maxCpus?: number;
  memoryMib?: number;
  maxMemoryMib?: number;
  security?: "default" | "restricted";
  /** Not in nook yet: missing_feature. */
  pullPolicy?: string;
  labels?: Record<string, string>;
  /** Not in nook yet: missing_feature. */
  scripts?: Record<string, string>;
  /** Written into the workspace after boot; paths outside /workspace are missing_feature. */
  setupFiles?: Record<string, NookSetupFile>;
  maxDurationSecs?: number;
  idleTimeoutSecs?: number;
  /** false keeps the writable root layer (nook persistence "sticky"). */
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

export declare function createNookSandboxProvider(options?: NookSandboxProviderOptions): SandboxProvider;
/** Registers in Smithers' registry (needs Smithers' runtime: Bun); returns the unregister function. */
export declare function registerNookSandboxProvider(options?: NookSandboxProviderOptions): () => void;
