/* SPDX-License-Identifier: Apache-2.0 */
/* nook stats and nook update: a running sandbox's cgroup, read and changed from libnook (the
 * supervisor need not be involved: the cgroup is named by the state folder and the name). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "sandbox/ctx.h"
#include "sandbox/state.h"
#include "sandbox/spec.h"
#include "store/store.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/parse.h"

int sb_running_rec(nook *n, const char *name, sandbox_rec *rec, nook_error *err) {
        store *st;
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        if ((r = store_sandbox_get(st, name, rec, err)) < 0)
                return r;
        if ((r = sb_reconcile_unlocked(n, rec, err)) < 0)
                return r;
        if (!streq(rec->state, "running"))
                return nook_err_set(err, NOOK_E_STATE, "Sandbox '%s' is not running", name);
        return 0;
}

static json_t *limit_json(uint64_t v) {
        return v == UINT64_MAX || v == 0 || v >= (UINT64_MAX >> 2) ? json_null()
                                                                   : json_integer((json_int_t)v);
}

int nook_sandbox_stats(nook *n, const char *name, char **ret_json, nook_error *err) {
        sandbox_rec rec = { 0 };
        iso_cgroup *cg = NULL;
        iso_cgroup_stats s;
        int r = sb_running_rec(n, name, &rec, err);
        sandbox_rec_done(&rec);
        if (r < 0)
                return r;
        r = iso_cgroup_open(n->home, name, &cg, err);
        if (r < 0)
                return r;
        r = iso_cgroup_read_stats(cg, &s, err);
        iso_cgroup_free(cg);
        if (r < 0)
                return r;
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "name", name, "cpuUsageNs",
                (json_int_t)s.cpu_usage_ns, "memoryBytes", (json_int_t)s.memory_current, "memoryPeakBytes",
                (json_int_t)s.memory_peak, "pids", (json_int_t)s.pids_current, "oomKills",
                (json_int_t)s.oom_kills, "cpusLimit",
                s.cpus_limit ? json_integer(s.cpus_limit) : json_null(), "memoryLimitBytes",
                limit_json(s.memory_limit), "pidsLimit", limit_json(s.pids_limit));
        char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return 0;
}

/* iso_cgroup is isolate's; its header has no cleanup helper yet. */
DEFINE_TRIVIAL_CLEANUP_FUNC(iso_cgroup *, iso_cgroup_free);

/* Only the limits an update may change: cpus, memoryMib or memory, pidsMax. */
static int update_check_keys(const char *update_json, nook_error *err) {
        json_t *u = json_loads(isempty(update_json) ? "{}" : update_json, JSON_REJECT_DUPLICATES, NULL);
        const char *k;
        json_t *v;
        bool bad = !json_is_object(u);
        json_object_foreach(u, k, v) if (!streq(k, "cpus") && !streq(k, "memoryMib") &&
                !streq(k, "memory") && !streq(k, "pidsMax")) bad = true;
        json_decref(u);
        if (bad)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid update: a JSON object of cpus, memoryMib or memory, pidsMax");
        return 0;
}

static int update_running(nook *n, const char *name, const char *update_json, nook_error *err) {
        _cleanup_(sandbox_rec_done) sandbox_rec rec = { 0 };
        _cleanup_(sb_spec_done) sb_spec spec = { 0 };
        _cleanup_(sb_spec_done) sb_spec upd = { 0 };
        _cleanup_(iso_cgroup_freep) iso_cgroup *cg = NULL;
        store *st;
        int r = sb_running_rec(n, name, &rec, err);
        if (r < 0)
                return r;
        /* The update is parsed by the spec parser: the same units and checks as at create. */
        r = update_check_keys(update_json, err);
        if (r < 0)
                return r;
        r = sb_spec_parse(rec.spec_json, &spec, err);
        if (r < 0)
                return r;
        r = sb_spec_parse(update_json, &upd, err);
        if (r < 0)
                return r;
        unsigned cpus = upd.cpus ? upd.cpus : spec.cpus;
        uint64_t mib = upd.memory_mib ? upd.memory_mib : spec.memory_mib;
        uint64_t pids = upd.pids_max ? upd.pids_max : spec.pids_max; /* as given: 0 = the default */
        /* Without maxCpus / maxMemoryMib the limits given at create are the ceiling, and no limit
         * none (the largest value the spec takes).  The ceiling is saved with the spec below, so
         * it outlives the update: it used to be the last update's limit (after --memory 256m,
         * 512m was refused as above a ceiling of 256). */
        if (!spec.max_cpus)
                spec.max_cpus = spec.cpus ? spec.cpus : PARSE_CPUS_MAX;
        if (!spec.max_memory_mib)
                spec.max_memory_mib = spec.memory_mib ? spec.memory_mib : SB_SPEC_MAX_MEMORY_MIB;
        if (spec.max_cpus && cpus > spec.max_cpus)
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Refusing cpus=%u for sandbox '%s': above its maxCpus (%u)", cpus, name,
                        spec.max_cpus);
        r = sb_spec_cpus_check_host(upd.cpus, err); /* after its own ceiling, more to the point */
        if (r < 0)
                return r;
        if (spec.max_memory_mib && mib > spec.max_memory_mib)
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Refusing memory of %llu MiB for sandbox '%s': above its maxMemoryMib (%llu)",
                        (unsigned long long)mib, name, (unsigned long long)spec.max_memory_mib);
        r = iso_cgroup_open(n->home, name, &cg, err);
        if (r < 0)
                return r;
        sb_spec eff = { .pids_max = pids };
        iso_limits l = { .cpus = cpus,
                .memory_bytes = mib * 1024 * 1024,
                .pids_max = sb_spec_pids_limit(&eff),
                .pids_optional = !pids }; /* the default: as at create, only where it can be */
        r = iso_cgroup_set_limits(cg, &l, err);
        if (r < 0)
                return r;
        spec.cpus = cpus;
        spec.memory_mib = mib;
        spec.pids_max = pids;
        char *t = sb_spec_to_json(&spec);
        if (!t)
                return nook_err_oom(err);
        free(rec.spec_json);
        rec.spec_json = t;
        r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        return store_sandbox_update(st, &rec, err);
}

int nook_sandbox_update(nook *n, const char *name, const char *update_json, nook_error *err) {
        int r = update_running(n, name, update_json, err);
        if (r < 0)
                return nook_err_wrap(err, "updating sandbox '%s'", name);
        return 0;
}
