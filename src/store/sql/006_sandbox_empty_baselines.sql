-- SPDX-License-Identifier: Apache-2.0
-- Migration 6: which of a sandbox's baselines (docs/design/diff-merge.md) are empty.  An empty
-- baseline is a bit here instead of a file in the state folder, so that a create with a new,
-- empty workspace and a fresh writable layer writes nothing there, and needs no state folder at
-- all (bench/README.md, issue #17).  Bit 1: the workspace's baseline is empty; bit 2: the
-- writable layer's.  A baseline file, where one is left from an older nook, is the baseline
-- whatever the bits say.  0 for every sandbox recorded before.
ALTER TABLE sandboxes ADD COLUMN empty_baselines INTEGER NOT NULL DEFAULT 0
        CHECK (empty_baselines BETWEEN 0 AND 3);
