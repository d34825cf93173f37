-- SPDX-License-Identifier: Apache-2.0
-- Migration 3: the image's own compressed blob for each layer position.  `layers` keeps one
-- row (one blob) per diff_id, shared by every image with that layer; two images can carry the
-- same layer compressed differently (gzip here, zstd there), and each needs its own blob to be
-- exported.  Prune keeps every blob named here.  NULL in rows older than this migration: the
-- shared row's blob is the image's own there (before, an image whose blob differed stored none).
ALTER TABLE image_layers ADD COLUMN blob TEXT;
