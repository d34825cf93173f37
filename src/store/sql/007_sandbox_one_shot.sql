-- SPDX-License-Identifier: Apache-2.0
-- Migration 7: a sandbox made for one command and removed when it ends (`nook run` without
-- --keep or -d: NOOK_CREATE_ONE_SHOT).  Nobody comes back for such a sandbox, so when its remover
-- or its creator was killed part way (it is stopped as "supervisor_died" or
-- "create_interrupted"), the next list or inspect removes what is left, as it does for a tied
-- sandbox whose client went ("client_gone").  0 for every sandbox recorded before.
ALTER TABLE sandboxes ADD COLUMN one_shot INTEGER NOT NULL DEFAULT 0 CHECK (one_shot IN (0, 1));
