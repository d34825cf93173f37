#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
"use strict";
// `npm install nook-sandbox` (the package's install script): builds the N-API addon into build/.
//
//   1. libnook installed on the machine (`pkg-config nook`, at least this package's version):
//      the addon links it, and that libnook finds its own nook-supervisor (libexec).
//   2. else: libnook.so, its image module libnook-image.so, nook-supervisor and the egress
//      gateway nook-egress (secrets, HTTP rules, audit) are built from the C sources shipped in
//      native/ (Meson + Ninja, only those four targets) and copied into build/ beside the addon,
//      which finds libnook through its rpath ($ORIGIN); libnook finds the other three beside
//      itself.
//
// The addon itself is one or a few C files compiled with $CC (default cc) against the N-API
// headers shipped in native/node-api: no node-gyp, no header download, no environment variable.
// When something is missing the install fails and names the Debian packages to install.
const { execFileSync, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const pkg = path.resolve(__dirname, "..");
const native = path.join(pkg, "native");
const out = path.join(pkg, "build");
const version = JSON.parse(fs.readFileSync(path.join(pkg, "package.json"), "utf8")).version;
const cc = process.env.CC || "cc";

// what libnook needs to build: pkg-config name -> Debian package
const LIBS = [
  ["sqlite3", "libsqlite3-dev"],
  ["jansson", "libjansson-dev"],
  ["libseccomp", "libseccomp-dev"],
  ["libnftables", "libnftables-dev"],
  ["libcurl", "libcurl4-openssl-dev"],
  ["libarchive", "libarchive-dev"],
  ["libcrypto", "libssl-dev"],
  ["nettle", "nettle-dev"],
  ["libnghttp2", "libnghttp2-dev"],
  ["smartcols", "libsmartcols-dev"],
];
// command -> Debian package
const TOOLS = [
  ["pkg-config", "pkg-config"],
  ["meson", "meson"],
  ["ninja", "ninja-build"],
  ["python3", "python3"],
];

function say(msg) {
  console.error(`nook-sandbox: ${msg}`);
}

class BuildError extends Error {}
/** Fails the install (main() reports it after the temporary directories are removed). */
function die(msg) {
  throw new BuildError(msg);
}

function has(cmd, args = ["--version"]) {
  const r = spawnSync(cmd, args, { stdio: "ignore" });
  return r.status === 0;
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "pipe", "pipe"], encoding: "utf8", ...opts });
  if (r.error) die(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) {
    process.stderr.write(r.stdout.slice(-8000));
    process.stderr.write(r.stderr.slice(-8000));
    die(`'${cmd} ${args.join(" ")}' failed (exit ${r.status}); its output is above`);
  }
  return r.stdout;
}

function pkgConfig(args) {
  return execFileSync("pkg-config", args, { encoding: "utf8" }).trim().split(/\s+/).filter(Boolean);
}

/** The system's libnook, when pkg-config finds one at least as new as this package. */
function systemNook() {
  if (!has("pkg-config")) return undefined;
  if (spawnSync("pkg-config", ["--atleast-version", version, "nook"], { stdio: "ignore" }).status !== 0) return undefined;
  return { cflags: pkgConfig(["--cflags", "nook"]), libs: pkgConfig(["--libs", "nook"]) };
}

function checkBuildDeps() {
  const missing = [];
  if (!has(cc)) missing.push(`gcc (the C compiler '${cc}')`);
  for (const [cmd, deb] of TOOLS) if (!has(cmd)) missing.push(deb);
  if (has("pkg-config"))
    for (const [pc, deb] of LIBS)
      if (spawnSync("pkg-config", ["--exists", pc], { stdio: "ignore" }).status !== 0) missing.push(deb);
  if (missing.length > 0)
    die(
      `libnook is not installed (pkg-config nook >= ${version} not found) and building it from the ` +
        `bundled sources needs: ${missing.join(", ")}.\n` +
        `  Install them:  sudo apt-get install ${missing.map((m) => m.split(" ")[0]).join(" ")}\n` +
        `  (or install nook's Debian package), then run the install again.`,
    );
}

/** Builds libnook.so, libnook-image.so, nook-supervisor and nook-egress from native/ into dest; returns the addon's link flags. */
function bundledNook(dest) {
  checkBuildDeps();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "nook-sandbox-build-"));
  try {
    say("building libnook, nook-supervisor and nook-egress from the bundled sources (Meson)...");
    run("meson", ["setup", tmp, native, "--buildtype=release", "-Dtests=false", "-Dnode=false", "-Dtest_hooks=false", "-Dwerror=false"]);
    const programs = ["src/supervisor/nook-supervisor", "src/egress/nook-egress"];
    run("ninja", ["-C", tmp, `libnook.so.${version}`, "src/image/libnook-image.so", ...programs]);
    fs.copyFileSync(path.join(tmp, `libnook.so.${version}`), path.join(dest, "libnook.so.0"));
    // the image module (pulls, archives, hashing), which libnook loads from beside itself
    fs.copyFileSync(path.join(tmp, "src", "image", "libnook-image.so"), path.join(dest, "libnook-image.so"));
    // the supervisor, and the egress gateway a sandbox with secrets or HTTP rules starts
    for (const p of programs) {
      const to = path.join(dest, path.basename(p));
      fs.copyFileSync(path.join(tmp, p), to);
      fs.chmodSync(to, 0o755);
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return {
    cflags: [`-I${path.join(native, "include")}`],
    libs: [path.join(dest, "libnook.so.0"), "-Wl,-rpath,$ORIGIN"],
  };
}

function buildAddon(dest, nook) {
  const sources = fs
    .readdirSync(path.join(pkg, "src"))
    .filter((f) => f.endsWith(".c"))
    .map((f) => path.join(pkg, "src", f));
  const args = ["-std=gnu11", "-O2", "-g", "-fPIC", "-shared", "-fvisibility=hidden", "-D_GNU_SOURCE", "-pthread"];
  args.push(`-I${path.join(native, "node-api")}`, ...nook.cflags, ...sources, "-o", path.join(dest, "nook_node.node"));
  args.push(...nook.libs, "-Wl,-z,relro,-z,now");
  run(cc, args);
}

function main() {
  if (!fs.existsSync(native)) {
    // a nook source checkout (npm ci for the tests): Meson builds the addon there
    if (!pkg.split(path.sep).includes("node_modules") && fs.existsSync(path.join(pkg, "..", "..", "include", "nook.h"))) {
      say("source checkout: the addon is built by Meson (meson setup build && ninja -C build); nothing to do");
      return;
    }
    die(`${native} is missing: this package was not made by 'npm pack' (whose prepack script adds it)`);
  }
  if (!has(cc)) die(`no C compiler ('${cc}'): sudo apt-get install gcc`);
  const stage = fs.mkdtempSync(path.join(pkg, ".build-"));
  try {
    const sys = systemNook();
    if (sys) say(`linking the installed libnook (pkg-config nook ${pkgConfig(["--modversion", "nook"])[0]})`);
    buildAddon(stage, sys ?? bundledNook(stage));
    fs.rmSync(out, { recursive: true, force: true });
    fs.chmodSync(stage, 0o755);
    fs.renameSync(stage, out);
  } catch (error) {
    fs.rmSync(stage, { recursive: true, force: true });
    throw error;
  }
  // load it once: a broken link fails the install, not the first require()
  const r = spawnSync(process.execPath, ["-e", `require(${JSON.stringify(path.join(out, "nook_node.node"))})`], { encoding: "utf8" });
  if (r.status !== 0) die(`the addon was built but does not load: ${r.stderr.trim()}`);
  say(`built ${path.join(out, "nook_node.node")}`);
}

try {
  main();
} catch (error) {
  console.error(`nook-sandbox: cannot build the native addon: ${error instanceof BuildError ? error.message : error.stack}`);
  process.exit(1);
}
