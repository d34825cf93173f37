-- SPDX-License-Identifier: Apache-2.0
-- Migration 5: where a branch came from (docs/design/branch.md).  branch_of names the sandbox it
-- was branched from (plain text, no foreign key: `rm` of the source keeps its branches, which share
-- nothing with it but copy-on-write blocks); branch_point is the instant of the copy, RFC 3339 in
-- UTC with milliseconds ("2026-12-03T07:15:02.123Z").  Both NULL for a sandbox that is no branch.
ALTER TABLE sandboxes ADD COLUMN branch_of TEXT;
ALTER TABLE sandboxes ADD COLUMN branch_point TEXT;
