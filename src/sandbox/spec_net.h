/* SPDX-License-Identifier: Apache-2.0 */
/* The network part of the sandbox spec: "network", "networkPolicy" and "ports". */
#pragma once

#include <jansson.h>

#include "nook.h"
#include "sandbox/spec.h"

/* Checks the network fields of spec object o (network is the value of "network", never NULL)
 * and fills s->network, s->net_rules, s->net_domains and s->ports in their canonical forms. */
int sb_spec_parse_network(json_t *o, const char *network, sb_spec *s, nook_error *err);
/* Adds "networkPolicy" and "ports" to the canonical JSON o when they are set. */
void sb_spec_network_to_json(const sb_spec *s, json_t *o);
void sb_spec_network_done(sb_spec *s);
