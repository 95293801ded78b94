/* The control-plane functions of a generated pipeline, called through cffi by
 * p4sim/switch/native/engine.py (NativeSwitch): the Python tables, profiles and
 * replication engine stay the book of record (they validate, allocate handles and
 * list entries exactly as the Python engine does), and each accepted write is mirrored
 * here, one entry or member or group at a time (no rebuild per write). Every index
 * coming from Python is range-checked; -1 means refused. Included last. */
#ifndef P4SIM_NATIVE_API_H
#define P4SIM_NATIVE_API_H

#define P4N_EXPORT __attribute__((visibility("default")))

P4N_EXPORT p4n_pipeline *p4n_new(void) {
    p4n_pipeline *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    for (int i = 0; i < 65536; i++) { p->sessions[i].port = -1; p->sessions[i].mgrp = -1; }
    if (p4n_setup(p)) { free(p); return NULL; }
    return p;
}

static void p4n_profile_free(p4n_profile *pr) {
    for (uint32_t g = 0; g < pr->ngroups; g++) free(pr->groups[g]);
    free(pr->groups); free(pr->members);
}

P4N_EXPORT void p4n_free(p4n_pipeline *p) {
    if (!p) return;
    for (int i = 0; i < P4N_NTABLES; i++) p4n_table_free(&p->tables[i]);
    for (int i = 0; i < P4N_NPROFILES; i++) p4n_profile_free(&p->profiles[i]);
    for (int i = 0; i < P4N_NCOUNTERS; i++) { free(p->cnt_pkts[i]); free(p->cnt_bytes[i]); }
    for (int i = 0; i < P4N_NREGISTERS; i++) free(p->regs[i]);
    for (int i = 0; i < P4N_NMETERS; i++) free(p->meters[i]);
    for (int i = 0; i < P4N_NVSETS; i++) { free(p->vsets[i].value); free(p->vsets[i].mask); }
    for (uint32_t i = 0; i < p->nmgrps; i++) { free(p->mgrps[i].ports); free(p->mgrps[i].rids); }
    free(p->mgrps); free(p->digests);
    free(p);
}

P4N_EXPORT int p4n_table_add(p4n_pipeline *p, int t, uint32_t handle, const uint64_t *lo,
                             const uint64_t *hi, const uint8_t *range, int plen, int64_t priority,
                             int action, const uint64_t *args, int nargs, int mbr, int grp) {
    if (t < 0 || t >= P4N_NTABLES) return -1;
    return p4n_table_insert(&p->tables[t], handle, lo, hi, range, plen, priority, action, args,
                            nargs, mbr, grp);
}

P4N_EXPORT int p4n_table_set_action(p4n_pipeline *p, int t, uint32_t handle, int action,
                                    const uint64_t *args, int nargs) {
    if (t < 0 || t >= P4N_NTABLES || nargs < 0 || nargs > P4N_MAX_ARGS) return -1;
    p4n_entry *e = p4n_table_get(&p->tables[t], handle);
    if (!e) return -1;
    e->action = action;
    memset(e->args, 0, sizeof e->args);
    if (nargs) memcpy(e->args, args, (size_t)nargs * sizeof *args);
    return 0;
}

P4N_EXPORT int p4n_table_delete(p4n_pipeline *p, int t, uint32_t handle) {
    if (t < 0 || t >= P4N_NTABLES) return -1;
    return p4n_table_remove(&p->tables[t], handle);
}

/* The default entry: an action with data (action -1: none), or a group (grp >= 0). */
P4N_EXPORT int p4n_table_set_default(p4n_pipeline *p, int t, int action, const uint64_t *args,
                                     int nargs, int grp) {
    if (t < 0 || t >= P4N_NTABLES || nargs < 0 || nargs > P4N_MAX_ARGS) return -1;
    p4n_table *tb = &p->tables[t];
    tb->def_action = action;
    tb->def_grp = grp;
    memset(tb->def_args, 0, sizeof tb->def_args);
    if (nargs) memcpy(tb->def_args, args, (size_t)nargs * sizeof *args);
    return 0;
}

P4N_EXPORT int p4n_entry_counter(p4n_pipeline *p, int t, uint32_t handle, uint64_t *pkts,
                                 uint64_t *bytes, int write) {
    if (t < 0 || t >= P4N_NTABLES) return -1;
    p4n_entry *e = p4n_table_get(&p->tables[t], handle);
    if (!e) return -1;
    if (write) { e->pkts = *pkts; e->bytes = *bytes; } else { *pkts = e->pkts; *bytes = e->bytes; }
    return 0;
}

static int p4n_meter_load(p4n_meter *m, int configured, int packets, int n, int64_t t0,
                          const double *rate, const int64_t *burst, const int64_t *tokens,
                          const int64_t *last, const int *color) {
    if (n < 0 || n > 4) return -1;
    m->configured = configured; m->packets = packets; m->n = n; m->t0 = t0;
    for (int i = 0; i < n; i++) {
        m->rate[i] = rate[i]; m->burst[i] = burst[i]; m->tokens[i] = tokens[i];
        m->last[i] = last[i]; m->color[i] = color[i];
    }
    return 0;
}

/* meter cell `idx` of meter array `mid`, or (mid < 0) the direct meter of entry `idx`
 * of table `t` */
P4N_EXPORT int p4n_meter_set(p4n_pipeline *p, int mid, int t, uint32_t idx, int configured,
                             int packets, int n, int64_t t0, const double *rate,
                             const int64_t *burst, const int64_t *tokens, const int64_t *last,
                             const int *color) {
    p4n_meter *m = NULL;
    if (mid >= 0 && mid < P4N_NMETERS && idx < p4n_meter_size[mid]) m = &p->meters[mid][idx];
    if (mid < 0 && t >= 0 && t < P4N_NTABLES) {
        p4n_entry *e = p4n_table_get(&p->tables[t], idx);
        if (e) m = &e->meter;
    }
    if (!m) return -1;
    return p4n_meter_load(m, configured, packets, n, t0, rate, burst, tokens, last, color);
}

P4N_EXPORT int p4n_member_set(p4n_pipeline *p, int prof, uint32_t mbr, int action,
                              const uint64_t *args, int nargs) {
    if (prof < 0 || prof >= P4N_NPROFILES || nargs < 0 || nargs > P4N_MAX_ARGS) return -1;
    p4n_profile *pr = &p->profiles[prof];
    if (mbr >= pr->nmembers) {
        uint32_t n = pr->nmembers ? pr->nmembers : 16;
        while (n <= mbr) n *= 2;
        p4n_member *ms = realloc(pr->members, n * sizeof *ms);
        if (!ms) return -1;
        memset(ms + pr->nmembers, 0, (n - pr->nmembers) * sizeof *ms);
        pr->members = ms; pr->nmembers = n;
    }
    p4n_member *m = &pr->members[mbr];
    memset(m, 0, sizeof *m);
    if (action < 0) return 0;   /* deleted */
    m->used = 1;
    m->action = action;
    if (nargs) memcpy(m->args, args, (size_t)nargs * sizeof *args);
    return 0;
}

/* group `grp` of profile `prof` now holds these members (sorted); n < 0 deletes it */
P4N_EXPORT int p4n_group_set(p4n_pipeline *p, int prof, uint32_t grp, int n,
                             const uint32_t *members) {
    if (prof < 0 || prof >= P4N_NPROFILES) return -1;
    p4n_profile *pr = &p->profiles[prof];
    if (grp >= pr->ngroups) {
        uint32_t cap = pr->ngroups ? pr->ngroups : 16;
        while (cap <= grp) cap *= 2;
        uint32_t **gs = realloc(pr->groups, cap * sizeof *gs);
        if (!gs) return -1;
        memset(gs + pr->ngroups, 0, (cap - pr->ngroups) * sizeof *gs);
        pr->groups = gs; pr->ngroups = cap;
    }
    free(pr->groups[grp]);
    pr->groups[grp] = NULL;
    if (n < 0) return 0;
    uint32_t *g = malloc(((size_t)n + 1) * sizeof *g);
    if (!g) return -1;
    g[0] = (uint32_t)n;
    if (n) memcpy(g + 1, members, (size_t)n * sizeof *g);
    pr->groups[grp] = g;
    return 0;
}

P4N_EXPORT int p4n_counter(p4n_pipeline *p, int c, uint32_t idx, uint64_t *pkts, uint64_t *bytes,
                           int write) {
    if (c < 0 || c >= P4N_NCOUNTERS || idx >= p4n_counter_size[c]) return -1;
    if (write) { p->cnt_pkts[c][idx] = *pkts; p->cnt_bytes[c][idx] = *bytes; }
    else { *pkts = p->cnt_pkts[c][idx]; *bytes = p->cnt_bytes[c][idx]; }
    return 0;
}

/* a cell's p4n_register_words[r] words (least significant first) from or to `value` */
P4N_EXPORT int p4n_register(p4n_pipeline *p, int r, uint32_t idx, uint64_t *value, int write) {
    if (r < 0 || r >= P4N_NREGISTERS || idx >= p4n_register_size[r]) return -1;
    int n = p4n_register_words[r];
    for (int i = 0; i < n; i++) {
        uint64_t *cell = &p->regs[r][(size_t)idx * (size_t)n + (size_t)i];
        if (write) *cell = value[i]; else value[i] = *cell;
    }
    return 0;
}

P4N_EXPORT int p4n_session_set(p4n_pipeline *p, uint32_t session, int port, int mgrp) {
    if (session > 0xFFFF) return -1;
    p->sessions[session].port = port;
    p->sessions[session].mgrp = mgrp;
    return 0;
}

/* multicast group `mgrp` now replicates to these (port, rid) copies; n < 0 deletes it */
P4N_EXPORT int p4n_mgrp_set(p4n_pipeline *p, uint32_t mgrp, int n, const uint32_t *ports,
                            const uint32_t *rids) {
    p4n_mgrp *g = p4n_mgrp_find(p, mgrp);
    if (!g) {
        if (n < 0) return 0;
        p4n_mgrp *gs = realloc(p->mgrps, (p->nmgrps + 1) * sizeof *gs);
        if (!gs) return -1;
        p->mgrps = gs;
        g = &gs[p->nmgrps++];
        memset(g, 0, sizeof *g);
        g->mgrp = mgrp;
    }
    free(g->ports); free(g->rids);
    g->ports = g->rids = NULL;
    g->n = 0;
    if (n < 0) {
        *g = p->mgrps[--p->nmgrps];
        return 0;
    }
    g->ports = malloc(((size_t)n + 1) * sizeof *g->ports);
    g->rids = malloc(((size_t)n + 1) * sizeof *g->rids);
    if (!g->ports || !g->rids) return -1;
    if (n) { memcpy(g->ports, ports, (size_t)n * 4); memcpy(g->rids, rids, (size_t)n * 4); }
    g->n = (uint32_t)n;
    return 0;
}

/* value set `v` now holds these (byte-padded value, mask) pairs */
P4N_EXPORT int p4n_vset_set(p4n_pipeline *p, int v, int n, const uint64_t *values,
                            const uint64_t *masks) {
    if (v < 0 || v >= P4N_NVSETS || n < 0) return -1;
    p4n_vset *s = &p->vsets[v];
    free(s->value); free(s->mask);
    s->value = malloc(((size_t)n + 1) * sizeof *values);
    s->mask = malloc(((size_t)n + 1) * sizeof *masks);
    s->n = 0;
    if (!s->value || !s->mask) return -1;
    if (n) { memcpy(s->value, values, (size_t)n * 8); memcpy(s->mask, masks, (size_t)n * 8); }
    s->n = (uint32_t)n;
    return 0;
}

P4N_EXPORT int p4n_crc_params(p4n_pipeline *p, int calc, uint64_t poly, uint64_t init,
                              uint64_t xor_out, int refin, int refout) {
    if (calc < 0 || calc >= P4N_NCALCS || !p->crcs[calc].width) return -1;
    p4n_crc_set(&p->crcs[calc], p->crcs[calc].width, poly, init, xor_out, refin, refout);
    return 0;
}

/* Moves up to `max` words of queued digests ([list id, n, values...]*) to out; the
 * number of words moved (whole messages only). */
P4N_EXPORT int p4n_digest_take(p4n_pipeline *p, uint64_t *out, int max) {
    uint32_t n = 0;
    while (n < p->ndigest) {
        uint32_t len = 2 + (uint32_t)p->digests[n + 1];
        if (n + len > (uint32_t)max) break;
        n += len;
    }
    memcpy(out, p->digests, n * sizeof *out);
    memmove(p->digests, p->digests + n, (p->ndigest - n) * sizeof *out);
    p->ndigest -= n;
    return (int)n;
}

P4N_EXPORT int p4n_rng_state(p4n_pipeline *p, const uint32_t *mt, uint32_t index) {
    if (index > 624) return -1;
    memcpy(p->rng.mt, mt, sizeof p->rng.mt);
    p->rng.index = index;
    return 0;
}

/* run_to_completion (v1model.py) for `n` frames of `len` bytes back to back at `frames`,
 * all from `port`: ingress, then egress of each job and of the jobs egress makes (FIFO),
 * queue metadata 0. The frames sent; the pipeline's cost per frame without Python in
 * between (bench/bench_pipeline.py). */
P4N_EXPORT int64_t p4n_run_batch(p4n_pipeline *p, uint32_t port, const uint8_t *frames,
                                 uint32_t len, int n, uint64_t now_us) {
    enum { Q = 64, CAP = 1 << 17 };
    p4n_handoff queue[Q], more[Q];
    uint8_t *out = malloc(CAP);
    if (!out) return -1;
    p4n_frame frame = {out, CAP, 0};
    int64_t sent = 0;
    for (int i = 0; i < n && sent >= 0; i++) {
        int q = p4n_ingress_op(p, port, frames + (size_t)i * len, len, now_us, queue, Q);
        if (q < 0) { sent = -1; break; }
        for (int j = 0; j < q; j++) {
            int m = p4n_egress_op(p, queue[j].job, 0, 0, now_us, 0, now_us, &frame, more, Q - q);
            if (m < 0) {
                for (int k = j + 1; k < q; k++) free(queue[k].job);
                sent = -1;
                break;
            }
            sent += p->sent;
            memcpy(queue + q, more, (size_t)m * sizeof *more);
            q += m;
        }
    }
    free(out);
    return sent;
}

/* Whether the last egress sent a frame: pipeline.h's len 0 also stands for an empty
 * frame, which the Python engine sends (and a wire cannot carry). */
P4N_EXPORT int p4n_egress_sent(p4n_pipeline *p) { return p->sent; }

/* Why the last ingress or egress returned -1 (P4N_ERR_*). */
P4N_EXPORT int p4n_last_error(p4n_pipeline *p) { return p->error; }

P4N_EXPORT uint64_t p4n_dropped_passes(p4n_pipeline *p) { return p->dropped_passes; }

#endif
