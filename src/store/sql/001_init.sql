-- SPDX-License-Identifier: Apache-2.0
-- Migration 1: the first schema.  Applied by store.c inside BEGIN IMMEDIATE together with its
-- row in schema_version; never edit a released migration, add NNN_<what>.sql instead.
-- STRICT tables make SQLite refuse a value of the wrong type instead of storing it anyway.
-- No table holds a secret value: callers strip them before a spec is stored (see store.h).

-- One row per sandbox name.  Times are seconds since the epoch, 0 = never.
CREATE TABLE sandboxes (
        name TEXT PRIMARY KEY NOT NULL,
        state TEXT NOT NULL,
        image TEXT,
        spec_json TEXT,
        sticky INTEGER NOT NULL DEFAULT 0 CHECK (sticky IN (0, 1)),
        created_at INTEGER NOT NULL DEFAULT 0,
        started_at INTEGER NOT NULL DEFAULT 0,
        stopped_at INTEGER NOT NULL DEFAULT 0,
        -- the supervisor and its start time (/proc/<pid>/stat field 22), so a reused pid is
        -- never mistaken for our supervisor
        supervisor_pid INTEGER NOT NULL DEFAULT 0,
        supervisor_start INTEGER NOT NULL DEFAULT 0,
        stop_reason TEXT
) STRICT;

-- Labels for filtering (`nook ls --filter label=k=v`); removed with their sandbox.
CREATE TABLE sandbox_labels (
        sandbox TEXT NOT NULL REFERENCES sandboxes (name) ON DELETE CASCADE ON UPDATE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (sandbox, key)
) STRICT, WITHOUT ROWID;
CREATE INDEX sandbox_labels_by_key ON sandbox_labels (key, value);

-- Image manifests in the content store, by manifest digest ("sha256:...").
CREATE TABLE images (
        digest TEXT PRIMARY KEY NOT NULL,
        config_digest TEXT NOT NULL,
        config_json TEXT,
        platform TEXT,
        size INTEGER NOT NULL DEFAULT 0,
        pulled_at INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Names the user pulled an image by ("docker.io/library/alpine:3"); several may share a digest.
CREATE TABLE image_refs (
        ref TEXT PRIMARY KEY NOT NULL,
        image TEXT NOT NULL REFERENCES images (digest) ON DELETE CASCADE
) STRICT;
CREATE INDEX image_refs_by_image ON image_refs (image);

-- Layers are shared between images and snapshots: one unpacked copy per diff_id.
CREATE TABLE layers (
        digest TEXT PRIMARY KEY NOT NULL,    -- the blob as fetched (compressed)
        diff_id TEXT NOT NULL UNIQUE,        -- the uncompressed tar, as in the image config
        media_type TEXT,
        size INTEGER NOT NULL DEFAULT 0,
        unpacked INTEGER NOT NULL DEFAULT 0 CHECK (unpacked IN (0, 1)),
        created_at INTEGER NOT NULL DEFAULT 0
) STRICT;

-- The ordered layer list of an image (position 0 = bottom).  RESTRICT: a layer in use by an
-- image cannot be deleted; garbage collection removes images first.
CREATE TABLE image_layers (
        image TEXT NOT NULL REFERENCES images (digest) ON DELETE CASCADE,
        position INTEGER NOT NULL CHECK (position >= 0),
        layer TEXT NOT NULL REFERENCES layers (digest) ON DELETE RESTRICT,
        PRIMARY KEY (image, position)
) STRICT, WITHOUT ROWID;
CREATE INDEX image_layers_by_layer ON image_layers (layer);

-- Disk state of a stopped sandbox: its writable layer on top of a base image.  The source
-- sandbox is a plain name, not a reference: a snapshot outlives the sandbox it came from.
CREATE TABLE snapshots (
        name TEXT PRIMARY KEY NOT NULL,
        digest TEXT NOT NULL UNIQUE,
        base_image TEXT REFERENCES images (digest) ON DELETE RESTRICT,
        layer TEXT REFERENCES layers (digest) ON DELETE RESTRICT,
        source_sandbox TEXT,
        size INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Named volumes under <home>/volumes/<name>.
CREATE TABLE volumes (
        name TEXT PRIMARY KEY NOT NULL,
        options_json TEXT,
        created_at INTEGER NOT NULL DEFAULT 0
) STRICT;
