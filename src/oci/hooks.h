/* SPDX-License-Identifier: Apache-2.0 */
/* runtime-spec hooks: each one is path, args, env, timeout; it gets the container's state JSON
 * on stdin, and a failing prestart/createRuntime/createContainer/startContainer hook fails the
 * operation (poststart and poststop failures are only logged, per the spec). */
#pragma once

#include <jansson.h>

#include "nook.h"

/* Runs hooks[name] in order with state on stdin.  Returns the first failure. */
int oci_hooks_run(json_t *hooks, const char *name, const char *state, nook_error *err);
