-- SPDX-License-Identifier: Apache-2.0
-- Migration 4: the pool of per-sandbox host id ranges (rootful sandboxes with idmapped mounts;
-- docs/design/security.md, "The id-range pool").  A row holds `size` host uids and gids from
-- `base` for the sandbox it names: its root is host uid `base`.  The range lives as long as the
-- sandbox's record, so it stays allocated while a stopped sandbox keeps its writable layer
-- (sticky) and goes, by the cascade, with the record on `rm` or any other path that deletes it.
-- Image layers and snapshots never hold files in a sandbox's range: they are stored at the
-- canonical base (100000000) and shown to each sandbox through an idmapped mount.
CREATE TABLE id_ranges (
        base INTEGER PRIMARY KEY NOT NULL CHECK (base > 0),
        size INTEGER NOT NULL CHECK (size > 0),
        sandbox TEXT NOT NULL UNIQUE REFERENCES sandboxes (name) ON DELETE CASCADE ON UPDATE CASCADE,
        created_at INTEGER NOT NULL DEFAULT 0
) STRICT;
