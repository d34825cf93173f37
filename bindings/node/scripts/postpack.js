#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
"use strict";
// After `npm pack`: removes native/, staged by scripts/prepack.js (it is not part of the tree).
const fs = require("node:fs");
const path = require("node:path");

fs.rmSync(path.join(__dirname, "..", "native"), { recursive: true, force: true });
fs.rmSync(path.join(__dirname, "..", "LICENSE"), { force: true }); // a copy of the tree's, by prepack
