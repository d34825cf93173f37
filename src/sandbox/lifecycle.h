/* SPDX-License-Identifier: Apache-2.0 */
/* The create path, for operations that make sandboxes from more than a spec (branch). */
#pragma once

#include <stdbool.h>

#include "nook.h"
#include "sandbox/spec.h"

/* What a branch brings to create beyond its spec. */
typedef struct sb_create_extra {
        bool keep_upper; /* the state folder's writable layer (upper) is filled already: keep it */
        const char *image_digest; /* the image the layer sits on (pinned), or NULL */
        const char *branch_of, *branch_point; /* recorded (005_sandbox_branch.sql), or NULL */
} sb_create_extra;

/* nook_sandbox_create's work for a validated name whose lock the caller holds; x may be NULL.
 * The workspace folder, when it exists, is used as it is: a branch fills it first, so whatever
 * create does with a workspace (its baseline, its provisioning) sees the branch point. */
int sb_create_locked(nook *n, const char *name, const sb_spec *spec, unsigned flags,
        const sb_create_extra *x, nook_error *err);
/* Internal create flag: tied to this handle as NOOK_CREATE_TIED, but when the handle goes the
 * sandbox stops ("starter_gone") and is kept: a stopped sticky sandbox that a copy starts to reach
 * its root filesystem goes back to stopped if the copier is killed.  The copy drops the tie
 * (sb_lifeline_drop) once it stopped the sandbox itself. */
#define SB_CREATE_TIED_STOP (1u << 30)

/* nook_sandbox_start with create flags (SB_CREATE_TIED_STOP). */
int sb_start(nook *n, const char *name, unsigned flags, nook_error *err);
/* Closes the lifelines this handle holds for name's tied sandbox (it stopped, or was removed):
 * a long-lived handle keeps no descriptor per tied create. */
void sb_lifeline_drop(nook *n, const char *name);

/* nook_sandbox_create with client_fd (taken; -1: none): the supervisor's end of a connection on
 * which an exec request is already queued; the supervisor serves it as soon as the sandbox is
 * ready, before it says so (nook_sandbox_create_exec). */
int sb_create(
        nook *n, const char *name, const char *spec_json, unsigned flags, int client_fd, nook_error *err);
