-- SPDX-License-Identifier: Apache-2.0
-- Migration 2: the manifest digest a sandbox's image reference resolved to when it was created
-- ("sha256:..."; NULL for "host", a rootfs directory, or a record older than this migration).
-- A tag can move to another image after the sandbox was made; the image it runs on is then
-- named by nothing but this column, which keeps `nook image rm` and `nook image prune` from
-- deleting its layers.
ALTER TABLE sandboxes ADD COLUMN image_digest TEXT;
CREATE INDEX sandboxes_by_image_digest ON sandboxes (image_digest);
