/* SPDX-License-Identifier: Apache-2.0 */
/* Options shared by `create` and `run` that build the sandbox spec (JSON, checked by libnook). */
#pragma once

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>

#define SPEC_OPTS_SHORT "e:l:m:p:v:"
#define SPEC_OPT_ENV_FILE 1044 /* --env-file: exec takes it too, and run gives it to its command */
/* clang-format off */
#define SPEC_OPTS_LONG                                                  \
        { "image", required_argument, NULL, 1000 },                     \
        { "env", required_argument, NULL, 'e' },                        \
        { "env-file", required_argument, NULL, SPEC_OPT_ENV_FILE },     \
        { "label", required_argument, NULL, 'l' },                      \
        { "sticky", no_argument, NULL, 1001 },                          \
        { "max-duration", required_argument, NULL, 1002 },              \
        { "idle-timeout", required_argument, NULL, 1003 },              \
        { "security", required_argument, NULL, 1004 },                  \
        { "network", required_argument, NULL, 1005 },                   \
        { "publish", required_argument, NULL, 'p' },                    \
        { "allow", required_argument, NULL, 1020 },                     \
        { "deny", required_argument, NULL, 1021 },                      \
        { "allow-domain", required_argument, NULL, 1022 },              \
        { "workdir", required_argument, NULL, 1006 },                   \
        { "spec", required_argument, NULL, 1007 },                      \
        { "persistence", required_argument, NULL, 1008 },               \
        { "user", required_argument, NULL, 'u' },                       \
        { "cpus", required_argument, NULL, 1010 },                      \
        { "memory", required_argument, NULL, 'm' },                     \
        { "pids-max", required_argument, NULL, 1011 },                  \
        { "max-cpus", required_argument, NULL, 1012 },                  \
        { "max-memory", required_argument, NULL, 1013 },                \
        { "volume", required_argument, NULL, 'v' },                     \
        { "tmpfs", required_argument, NULL, 1014 },                     \
        { "allow-sensitive-volume", no_argument, NULL, 1015 },          \
        { "script", required_argument, NULL, 1016 },                    \
        { "setup-file", required_argument, NULL, 1017 },                \
        { "snapshot", required_argument, NULL, 1018 },                  \
        { "insecure-registry", required_argument, NULL, 1030 },         \
        { "secret", required_argument, NULL, 1040 },                    \
        { "allow-http", required_argument, NULL, 1041 },                \
        { "egress-ca", required_argument, NULL, 1042 },                 \
        { "egress-audit", no_argument, NULL, 1043 }
/* clang-format on */

/* The options of the sandbox spec; `run` leaves out -e and -u, which there apply to its command
 * (as docker run) and are not stored: SPEC_OPTS_HELP_RUN. */
#define SPEC_OPTS_HELP_A                                                                                    \
        "  --image IMAGE          'host' (default), a root filesystem directory, or a registry\n"           \
        "                         image (alpine:3, ghcr.io/o/r:tag), pulled once, then cached\n"
#define SPEC_OPTS_HELP_E                                                                                    \
        "  -e, --env NAME=VALUE   environment for every exec (stored: no secrets here); a bare NAME\n"      \
        "                         takes its value from this environment (left out when unset)\n"            \
        "  --env-file FILE        NAME=VALUE lines, as docker reads them ('#' comments; '-': stdin)\n"
#define SPEC_OPTS_HELP_B                                                                                    \
        "  -l, --label KEY=VALUE  a label (repeatable)\n"                                                   \
        "  --sticky               keep the writable root layer across stop/start (on disk)\n"               \
        "  --persistence MODE     ephemeral (default: the writable root layer is in memory, in\n"           \
        "                         the runtime tmpfs, counted in --memory) or sticky\n"                      \
        "  --max-duration DUR     retire after DUR (e.g. 30m); the workspace is kept\n"                     \
        "  --idle-timeout DUR     stop after DUR (>= 1s) with no exec and no client\n"                      \
        "  --security PROFILE     default or restricted\n"                                                  \
        "  --network MODE         off (default; loopback only), public (public internet only, DNS),\n"      \
        "                         policy (only what --allow/--allow-domain allow)\n"                        \
        "  -p, --publish [ADDR:]HOSTPORT:PORT  publish a guest TCP port on the host (ADDR default\n"        \
        "                         127.0.0.1); needs the network on\n"                                       \
        "  --allow CIDR[:PORTS]   policy: allow a range (ports 80,443,8000-8080); rules apply in order\n"   \
        "  --deny CIDR[:PORTS]    policy: deny a range\n"                                                   \
        "                         (with --network public both are exceptions to its public-only floor)\n"   \
        "  --allow-domain NAME    policy: allow example.com or *.example.com (through nook's resolver)\n"   \
        "                         (without --network, --allow, --deny and --allow-domain mean policy)\n"    \
        "  --workdir DIR          default working directory of execs (default /workspace)\n"
#define SPEC_OPTS_HELP_U "  -u, --user USER        default user of execs\n"
#define SPEC_OPTS_HELP_C                                                                                    \
        "  --cpus N               CPU limit, whole CPUs (fractions round up)\n"                             \
        "  -m, --memory SIZE      memory limit, not 0: 512m, 2g (the OOM killer ends what exceeds it)\n"    \
        "  --pids-max N           process limit, threads count (default 2048 where nook has a\n"            \
        "                         cgroup; 0: none); an egress gateway counts: one, and a\n"                 \
        "                         thread per connection through it\n"                                       \
        "  --max-cpus N, --max-memory SIZE  headroom for 'nook update'\n"                                   \
        "  -v, --volume SRC:DST[:ro|rw]  bind a host path (read-only unless :rw) or a named\n"              \
        "                         volume (SRC without '/') at DST\n"                                        \
        "  --tmpfs DST[:SIZE]     a tmpfs at DST (default 64m)\n"                                           \
        "  --allow-sensitive-volume  allow binding credential folders, sockets, /proc...\n"                 \
        "  --script NAME=FILE     a script on PATH, read-only under /.nook/scripts\n"                       \
        "  --setup-file PATH=FILE write FILE's content at guest PATH before the first exec\n"               \
        "  --snapshot SNAP        cold-boot from a snapshot (name or digest): its disk state over its\n"    \
        "                         image; restores its workspace into an empty one\n"                        \
        "  --spec FILE            a JSON spec (- for stdin); the options above override it\n"               \
        "  --insecure-registry HOST  pull --image from HOST[:PORT] over plain HTTP (repeatable; also\n"     \
        "                         NOOK_INSECURE_REGISTRIES=HOST,HOST)\n"                                    \
        "  --secret NAME@HOST[,HOST...][:body]  the value of your environment variable NAME, kept\n"        \
        "                         out of the sandbox: the guest's NAME holds a placeholder that nook's\n"   \
        "                         egress gateway replaces in HTTPS requests to those hosts only\n"          \
        "                         (*.example.com: any name below; :body: in request bodies too);\n"         \
        "                         needs --network public or policy\n"                                       \
        "  --allow-http 'METHOD URL'  allow only matching HTTP(S) requests (repeatable; first match;\n"     \
        "                         e.g. 'GET https://api.github.com/repos/*'); others get 403\n"             \
        "                         (ports 80 and 443: other ports, and a private address opened\n"           \
        "                         by --allow, go by the network policy, unjudged)\n"                        \
        "  --egress-ca FILE       a PEM CA the gateway trusts for upstream servers (private CAs)\n"         \
        "  --egress-audit         run the gateway for its audit log only ('nook egress log NAME')\n"
#define SPEC_OPTS_HELP SPEC_OPTS_HELP_A SPEC_OPTS_HELP_E SPEC_OPTS_HELP_B SPEC_OPTS_HELP_U SPEC_OPTS_HELP_C
#define SPEC_OPTS_HELP_RUN SPEC_OPTS_HELP_A SPEC_OPTS_HELP_B SPEC_OPTS_HELP_C

/* Applies one parsed option to the spec; returns 1 if it was a spec option, 0 if not, <0 with
 * the usage error already printed. */
int spec_opt_apply(const char *cmd, json_t *spec, int opt, const char *arg);
/* Call once after all options: applies flags that affect several entries. */
void spec_opts_finish(json_t *spec);
