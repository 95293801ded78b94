/* The receiving half of an RC queue pair: tccl/qp.py's Responder, step for step.
 * Accepts the expected PSN only, checks the ICRC, reassembles messages (each one a
 * NIC_CQ_RECV completion), acknowledges packets that ask for it, NAKs the first
 * out-of-sequence packet of a gap, and answers CE-marked packets with at most one CNP
 * per `cnp_interval`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nic.h"

nic_responder *nic_responder_new(uint32_t qpn, const uint8_t *hdr, size_t hdr_len,
                                 const uint8_t *cnp_hdr, size_t cnp_hdr_len, double cnp_interval,
                                 nic_cq *cq, uint64_t user)
{
    if (hdr_len != NIC_HDR_LEN || cnp_hdr_len != NIC_HDR_LEN || cq == NULL)
        return NULL;
    nic_responder *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->qpn = qpn;
    memcpy(r->tmpl.hdr, hdr, NIC_HDR_LEN);
    memcpy(r->cnp_tmpl.hdr, cnp_hdr, NIC_HDR_LEN);
    r->cnp_interval = cnp_interval;
    r->last_cnp = -INFINITY;
    r->cq = cq;
    r->user = user;
    return r;
}

void nic_responder_free(nic_responder *r)
{
    if (r == NULL)
        return;
    free(r->parts);
    free(r);
}

static void reply_ack(nic_responder *r, nic_reply *out, uint32_t psn, int nak)
{
    size_t n = nic_ack(&r->tmpl, psn, r->msn, nak, out->frame[out->n], NIC_SMALL_FRAME);
    if (n)
        out->len[out->n++] = n;
}

/* Appends a payload to the message being reassembled; 0 if memory ran out (the frame
 * is then dropped unacknowledged, and go-back-N sends it again). */
static int append(nic_responder *r, const uint8_t *data, size_t len)
{
    if (r->parts_len + len > r->parts_cap) {
        size_t cap = r->parts_cap ? r->parts_cap : 4096;
        while (cap < r->parts_len + len)
            cap *= 2;
        uint8_t *p = realloc(r->parts, cap);
        if (p == NULL)
            return 0;
        r->parts = p;
        r->parts_cap = cap;
    }
    memcpy(r->parts + r->parts_len, data, len);
    r->parts_len += len;
    return 1;
}

void nic_responder_on_frame(nic_responder *r, const uint8_t *frame, size_t len,
                            const nic_parsed *p, double now, nic_reply *out)
{
    out->n = 0;
    if (!nic_icrc_ok(frame, len) || p->payload_off > p->payload_end || p->payload_end > len) {
        r->stats.bad_icrc += 1;
        return;
    }
    if (p->ecn == NIC_ECN_CE) {
        r->stats.ce_marked += 1;
        double gap = now - r->last_cnp;
        if (gap >= r->cnp_interval) {
            if (r->stats.cnps_sent) {
                double g = r->stats.min_cnp_gap ? r->stats.min_cnp_gap : gap;
                r->stats.min_cnp_gap = gap < g ? gap : g;
            }
            r->last_cnp = now;
            r->stats.cnps_sent += 1;
            size_t n = nic_cnp(&r->cnp_tmpl, out->frame[out->n], NIC_SMALL_FRAME);
            if (n)
                out->len[out->n++] = n;
        }
    }
    int32_t d = nic_psn_diff(p->psn, r->epsn);
    if (d < 0) {
        r->stats.duplicates += 1;
        reply_ack(r, out, (r->epsn - 1) & NIC_PSN_MASK, 0);
        return;
    }
    if (d > 0) {
        r->stats.out_of_order += 1;
        if (!r->nak_sent) {
            r->nak_sent = 1;
            reply_ack(r, out, r->epsn, 1);
        }
        return;
    }
    int first = p->opcode == NIC_SEND_FIRST || p->opcode == NIC_SEND_ONLY ||
                p->opcode == NIC_WRITE_FIRST || p->opcode == NIC_WRITE_ONLY;
    int last = p->opcode == NIC_SEND_LAST || p->opcode == NIC_SEND_ONLY ||
               p->opcode == NIC_WRITE_LAST || p->opcode == NIC_WRITE_ONLY;
    if (first)
        r->parts_len = 0;
    if (!append(r, frame + p->payload_off, p->payload_end - p->payload_off))
        return;
    r->nak_sent = 0;
    r->last_sport = p->sport;
    r->stats.packets += 1;
    r->stats.bytes += (int64_t)len;
    r->epsn = (r->epsn + 1) & NIC_PSN_MASK;
    if (last) {
        r->msn = (r->msn + 1) & NIC_PSN_MASK;
        r->stats.messages += 1;
        uint8_t *data = malloc(r->parts_len ? r->parts_len : 1);
        if (data == NULL) {
            r->cq->oom = 1;
        } else {
            memcpy(data, r->parts, r->parts_len);
            nic_cq_push(r->cq, NIC_CQ_RECV, r->user, 0, data, r->parts_len);
        }
        r->parts_len = 0;
    }
    if (p->ackreq)
        reply_ack(r, out, p->psn, 0);
}
