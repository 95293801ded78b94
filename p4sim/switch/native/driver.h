/* simple_switch's packet driver around a generated pipeline: V1Switch._ingress,
 * run_egress, _to_session and _multicast (p4sim/switch/v1model.py) in C, statement for
 * statement, behind the p4n_ops table of pipeline.h. Included at the end of the
 * generated file, which defines the slots (P4N_S_*), masks (P4N_M_*), the PHV template,
 * the field and learn lists and the functions p4n_parse, p4n_verify, p4n_update,
 * p4n_deparse and p4n_control. */
#ifndef P4SIM_NATIVE_DRIVER_H
#define P4SIM_NATIVE_DRIVER_H

enum { P4N_NORMAL, P4N_INGRESS_CLONE, P4N_EGRESS_CLONE, P4N_COALESCED, P4N_RECIRC,
       P4N_REPLICATION, P4N_RESUBMIT };
#define P4N_MAX_PASSES 1000
#define P4N_DROP_PORT 511

struct p4n_job {
    uint64_t F[P4N_NSLOTS + 1];
    p4n_state S;
    uint32_t port, priority, paylen;
    uint8_t payload[];
};

typedef struct {
    p4n_handoff *out;
    int n, max, overflow;   /* overflow: more hand-offs than max, or the packet failed */
} p4n_jobs;

static void p4n_job_free(p4n_pipeline *p, p4n_job *job) { (void)p; free(job); }

/* V1Switch._job: a copy of F and S (its payload too) queued for `port`. */
static void p4n_job_new(p4n_jobs *jobs, uint32_t port, const uint64_t *F, const p4n_state *S) {
    if (jobs->n >= jobs->max) { jobs->overflow = 1; return; }
    p4n_job *job = malloc(sizeof *job + S->paylen + 1);
    if (!job) { jobs->overflow = 1; return; }
    memcpy(job->F, F, sizeof(uint64_t) * P4N_NSLOTS);
    job->S = *S;
    job->paylen = S->paylen;
    if (S->paylen) memcpy(job->payload, S->payload, S->paylen);
    job->S.payload = job->payload;
    job->port = port;
    job->priority = P4N_S_PRIO >= 0 ? (uint32_t)F[P4N_S_PRIO >= 0 ? P4N_S_PRIO : 0] : 0;
    p4n_handoff *h = &jobs->out[jobs->n++];
    h->job = job;
    h->port = port;
    h->priority = job->priority;
    h->length = S->plen < 0 ? 0 : (uint32_t)S->plen;
}

static void p4n_reset_metadata(uint64_t *F) {
    for (int i = 0; i < P4N_NMETA; i++) F[p4n_meta_slots[i]] = 0;
}

static void p4n_copy_field_list(uint32_t fl, const uint64_t *src, uint64_t *dst) {
    int n = 0;
    const int *slots = p4n_field_list(fl, &n);
    for (int i = 0; i < n; i++) dst[slots[i]] = src[slots[i]];
}

static void p4n_multicast(p4n_pipeline *p, uint64_t *F, const p4n_state *S, uint32_t mgrp,
                          p4n_jobs *jobs) {
    p4n_mgrp *g = p4n_mgrp_find(p, mgrp);
    if (!g) return;
    uint64_t F2[P4N_NSLOTS + 1];
    for (uint32_t i = 0; i < g->n; i++) {
        if (P4N_S_RID >= 0) F[P4N_S_RID >= 0 ? P4N_S_RID : 0] = g->rids[i] & P4N_M_RID;
        memcpy(F2, F, sizeof(uint64_t) * P4N_NSLOTS);
        p4n_state S2;
        p4n_state_init(&S2, S->ilen, S->plen, S->passes);
        S2.payload = S->payload; S2.paylen = S->paylen;
        p4n_job_new(jobs, g->ports[i], F2, &S2);
    }
}

static void p4n_to_session(p4n_pipeline *p, const p4n_session *cfg, uint64_t *F,
                           const p4n_state *S, p4n_jobs *jobs) {
    if (cfg->mgrp >= 0) p4n_multicast(p, F, S, (uint32_t)cfg->mgrp, jobs);
    if (cfg->port >= 0) p4n_job_new(jobs, (uint32_t)cfg->port, F, S);
}

static void p4n_run(p4n_pipeline *p, uint64_t *F, p4n_state *S, int node) {
    S->ex = 0;
    while (node >= 0) {
        node = p4n_control(p, F, S, node);
        if (S->ex) break;
    }
    S->ex = 0;
}

/* V1Switch._ingress on F/S for the frame `data`. */
static void p4n_ingress_loop(p4n_pipeline *p, uint32_t port, uint64_t *F0, p4n_state *S0,
                             const uint8_t *data, uint32_t dlen, p4n_jobs *jobs) {
    uint64_t F[P4N_NSLOTS + 1];
    p4n_state S = *S0;
    memcpy(F, F0, sizeof(uint64_t) * P4N_NSLOTS);
    for (;;) {
        int64_t ingress_size = S.plen;
        int err = 0;
        uint32_t pos = p4n_parse(p, F, &S, data, dlen, &err);
        S.payload = data + pos; S.paylen = dlen - pos;
        if (P4N_S_PERR >= 0) F[P4N_S_PERR >= 0 ? P4N_S_PERR : 0] = (uint64_t)err;
        int ok = p4n_verify(p, F, &S);
        if (P4N_S_CERR >= 0) F[P4N_S_CERR >= 0 ? P4N_S_CERR : 0] = ok ? 0 : 1;
        p4n_run(p, F, &S, P4N_INGRESS_INIT);
        if (S.err) { p->error = S.err; jobs->overflow = 1; return; }  /* Python raised */
        uint64_t egress_spec = F[P4N_S_ESPEC];
        if (S.clone >= 0) {
            p4n_session cfg = p->sessions[S.clone & 0xFFFF];
            S.clone = -1;
            if (cfg.port >= 0 || cfg.mgrp >= 0) {
                uint64_t F2[P4N_NSLOTS + 1];
                memcpy(F2, p4n_template, sizeof(uint64_t) * P4N_NSLOTS);
                p4n_state S2;
                p4n_state_init(&S2, S.ilen, ingress_size, S.passes);
                F2[P4N_S_IN] = port;
                int err2 = 0;
                uint32_t pos2 = p4n_parse(p, F2, &S2, data, dlen, &err2);
                S2.payload = data + pos2; S2.paylen = dlen - pos2;
                p4n_reset_metadata(F2);
                p4n_copy_field_list(S.clone_fl, F, F2);
                F2[P4N_S_INST] = P4N_INGRESS_CLONE;
                p4n_to_session(p, &cfg, F2, &S2, jobs);
            }
        }
        if (S.learn) {
            int n = 0;
            const int *slots = p4n_learn_list(S.learn, &n);
            if (slots) p4n_digest_push(p, S.learn, F, slots, n);
        }
        if (S.resubmit) {
            if (S.passes >= P4N_MAX_PASSES) { p->dropped_passes++; return; }
            uint64_t F2[P4N_NSLOTS + 1];
            memcpy(F2, p4n_template, sizeof(uint64_t) * P4N_NSLOTS);
            p4n_copy_field_list(S.resubmit, F, F2);
            F2[P4N_S_INST] = P4N_RESUBMIT;
            F2[P4N_S_LEN] = (uint64_t)ingress_size;
            memcpy(F, F2, sizeof(uint64_t) * P4N_NSLOTS);
            uint32_t passes = S.passes + 1;
            p4n_state_init(&S, S.ilen, ingress_size, passes);
            continue;
        }
        uint64_t mgid = P4N_S_MCAST >= 0 ? F[P4N_S_MCAST >= 0 ? P4N_S_MCAST : 0] : 0;
        if (mgid) {
            F[P4N_S_INST] = P4N_REPLICATION;
            p4n_multicast(p, F, &S, (uint32_t)mgid, jobs);
            return;
        }
        if (egress_spec == P4N_DROP_PORT) return;
        F[P4N_S_INST] = P4N_NORMAL;
        p4n_job_new(jobs, (uint32_t)egress_spec, F, &S);
        return;
    }
}

static int p4n_ingress_op(p4n_pipeline *p, uint32_t in_port, const uint8_t *frame, uint32_t len,
                          uint64_t now_us, p4n_handoff *out, int max) {
    p->now = (int64_t)now_us;
    p->error = P4N_ERR_SIZE;
    uint64_t F[P4N_NSLOTS + 1];
    memcpy(F, p4n_template, sizeof(uint64_t) * P4N_NSLOTS);
    p4n_state S;
    p4n_state_init(&S, len, len, 0);
    F[P4N_S_IN] = in_port & P4N_M_IN;
    F[P4N_S_LEN] = len & P4N_M_LEN;
    F[P4N_S_INST] = P4N_NORMAL;
    if (P4N_S_IGTS >= 0) F[P4N_S_IGTS >= 0 ? P4N_S_IGTS : 0] = now_us & P4N_M_IGTS;
    p4n_jobs jobs = {out, 0, max, 0};
#ifdef P4N_EXACT_FRAMES
    /* the sanitizer build parses a malloc'd copy of exactly `len` bytes, so that
     * AddressSanitizer sees any read past the frame's end */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) return -1;
    memcpy(exact, frame, len);
    frame = exact;
#endif
    p4n_ingress_loop(p, in_port, F, &S, frame, len, &jobs);
#ifdef P4N_EXACT_FRAMES
    free(exact);
#endif
    if (jobs.overflow) {
        for (int i = 0; i < jobs.n; i++) free(out[i].job);
        return -1;
    }
    return jobs.n;
}

static int p4n_egress_op(p4n_pipeline *p, p4n_job *job, uint32_t enq_qdepth, uint32_t deq_qdepth,
                         uint64_t enq_timestamp, uint32_t deq_timedelta, uint64_t now_us,
                         p4n_frame *frame, p4n_handoff *more, int max) {
    p->now = (int64_t)now_us;
    uint64_t *F = job->F;
    p4n_state *S = &job->S;
    p4n_jobs jobs = {more, 0, max, 0};
    int rc = 0;
    frame->len = 0;
    p->sent = 0;
    if (P4N_S_EGTS >= 0) F[P4N_S_EGTS >= 0 ? P4N_S_EGTS : 0] = now_us & P4N_M_EGTS;
#if P4N_HAVE_Q
    F[P4N_S_Q0] = enq_timestamp & P4N_M_Q0;
    F[P4N_S_Q1] = enq_qdepth & P4N_M_Q1;
    F[P4N_S_Q2] = deq_timedelta & P4N_M_Q2;
    F[P4N_S_Q3] = deq_qdepth & P4N_M_Q3;
#else
    (void)enq_qdepth; (void)deq_qdepth; (void)enq_timestamp; (void)deq_timedelta;
#endif
    F[P4N_S_EPORT] = job->port & P4N_M_EPORT;
    F[P4N_S_ESPEC] = P4N_ESPEC_RESET;
    F[P4N_S_LEN] = (uint64_t)S->plen & P4N_M_LEN;
    p->error = P4N_ERR_SIZE;
    p4n_run(p, F, S, P4N_EGRESS_INIT);
    if (S->err) { p->error = S->err; rc = -1; goto done; }
    if (S->clone >= 0) {
        p4n_session cfg = p->sessions[S->clone & 0xFFFF];
        uint32_t fl = S->clone_fl;
        S->clone = -1;
        int have = cfg.port >= 0 || cfg.mgrp >= 0;
        if (have && S->passes >= P4N_MAX_PASSES) {
            p->dropped_passes++;
        } else if (have) {
            uint64_t F2[P4N_NSLOTS + 1];
            memcpy(F2, F, sizeof(uint64_t) * P4N_NSLOTS);
            p4n_reset_metadata(F2);
            p4n_copy_field_list(fl, F, F2);
            F2[P4N_S_INST] = P4N_EGRESS_CLONE;
            p4n_state S2;
            p4n_state_init(&S2, S->ilen, S->plen, S->passes + 1);
            S2.payload = S->payload; S2.paylen = S->paylen;
            p4n_to_session(p, &cfg, F2, &S2, &jobs);
        }
    }
    if (F[P4N_S_ESPEC] == P4N_DROP_PORT) goto done;
    p4n_update(p, F, S);
    {
        p4n_bitbuf b = {frame->data, frame->cap, 0, 0};
        p4n_deparse(p, F, S, &b);
        if (S->err) { p->error = S->err; rc = -1; goto done; }
        uint32_t hlen = p4n_bytes(&b);
        if (b.overflow || (uint64_t)hlen + job->paylen > frame->cap) { rc = -1; goto done; }
        memcpy(frame->data + hlen, job->payload, job->paylen);
        uint32_t n = hlen + job->paylen;
        if (S->recirc) {
            if (S->passes >= P4N_MAX_PASSES) { p->dropped_passes++; goto done; }
            uint64_t F2[P4N_NSLOTS + 1];
            memcpy(F2, p4n_template, sizeof(uint64_t) * P4N_NSLOTS);
            p4n_copy_field_list(S->recirc, F, F2);
            F2[P4N_S_INST] = P4N_RECIRC;
            F2[P4N_S_LEN] = n;
            p4n_state S2;
            p4n_state_init(&S2, n, n, S->passes + 1);
            p4n_ingress_loop(p, 0, F2, &S2, frame->data, n, &jobs);
            goto done;
        }
        if (S->trunc >= 0 && S->trunc < (int64_t)n) n = (uint32_t)S->trunc;
        frame->len = n;
        p->sent = 1;
    }
done:
    free(job);
    if (jobs.overflow || rc < 0) {
        for (int i = 0; i < jobs.n; i++) free(more[i].job);
        frame->len = 0;
        p->sent = 0;
        return -1;
    }
    return jobs.n;
}

static const p4n_ops P4N_OPS = {p4n_ingress_op, p4n_egress_op, p4n_job_free};

const p4n_ops *p4n_get_ops(void) { return &P4N_OPS; }

#endif
