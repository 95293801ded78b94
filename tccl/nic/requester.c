/* The sending half of an RC queue pair: tccl/qp.py's Requester, step for step.
 *
 * Messages are cut into MTU packets (SEND FIRST/MIDDLE/LAST or ONLY); at most `window`
 * are unacknowledged; packets leave at the QP's DCQCN rate; a NAK or `rto` without
 * progress goes back to the oldest unacknowledged PSN (go-back-N). A source-port change
 * waits for a message boundary with nothing in flight. A message is copied at post and
 * freed when its last packet is acknowledged (then its NIC_CQ_SEND completion). */
#include <stdlib.h>
#include <string.h>

#include "nic.h"
#include "sync.h"

static int is_last(uint8_t op)
{
    return op == NIC_SEND_LAST || op == NIC_SEND_ONLY || op == NIC_WRITE_LAST || op == NIC_WRITE_ONLY;
}

nic_requester *nic_requester_new(uint32_t qpn, const uint8_t *hdr, size_t hdr_len,
                                 const nic_dcqcn_params *p, double now, uint32_t mtu,
                                 uint32_t window, double rto, nic_cq *cq, uint64_t user)
{
    if (hdr_len != NIC_HDR_LEN || mtu < 1 || mtu > NIC_MAX_MTU || window < 1 || window > NIC_MAX_WINDOW ||
        !(rto > 0) || cq == NULL)
        return NULL;
    nic_requester *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->inflight = calloc(window, sizeof *r->inflight);
    if (r->inflight == NULL) {
        free(r);
        return NULL;
    }
    r->qpn = qpn;
    memcpy(r->tmpl.hdr, hdr, NIC_HDR_LEN);
    r->mtu = mtu;
    r->window = window;
    r->rto = rto;
    nic_dcqcn_init(&r->rate, p, now);
    r->next_tx = r->last_progress = r->unblocked_at = now;
    r->cq = cq;
    r->user = user;
    return r;
}

static nic_seg *seg_at(const nic_requester *r, uint32_t i)
{
    return &r->inflight[(r->if_head + i) % r->window];
}

void nic_requester_free(nic_requester *r)
{
    if (r == NULL)
        return;
    /* Queued messages (one may be partly sent), then those wholly sent, in flight. */
    for (nic_msg *m = r->q_head, *next; m != NULL; m = next) {
        next = m->next;
        free(m->data);
        free(m);
    }
    for (uint32_t i = 0; i < r->if_len; i++) {
        nic_seg *s = seg_at(r, i);
        if (is_last(s->opcode)) {
            free(s->msg->data);
            free(s->msg);
        }
    }
    free(r->inflight);
    free(r);
}

int nic_requester_has_work(const nic_requester *r)
{
    if (r->resend < r->if_len)
        return 1;
    if (r->q_head == NULL || r->if_len >= r->window)
        return 0;
    if (r->port_change && r->q_head->offset == 0)
        return r->if_len == 0;        /* boundary: wait until drained */
    return 1;
}

int nic_requester_idle(const nic_requester *r)
{
    nic_sync_lock(r->cq->sync);
    int idle = r->q_head == NULL && r->if_len == 0;
    nic_sync_unlock(r->cq->sync);
    return idle;
}

uint16_t nic_requester_sport(const nic_requester *r)
{
    nic_sync_lock(r->cq->sync);
    const uint8_t *p = r->tmpl.hdr + NIC_UDP_OFF + NIC_SPORT_AT;
    uint16_t sport = (uint16_t)(p[0] << 8 | p[1]);
    nic_sync_unlock(r->cq->sync);
    return sport;
}

static void unblocked(nic_requester *r, int had_work, double at)
{
    if (!had_work && nic_requester_has_work(r))
        r->unblocked_at = at;
}

int nic_requester_post(nic_requester *r, const uint8_t *data, size_t len, uint64_t wr_id,
                       int has_now, double now)
{
    if (len == 0 || len > UINT32_MAX)
        return -1;
    nic_msg *m = malloc(sizeof *m);
    uint8_t *copy = malloc(len);
    if (m == NULL || copy == NULL) {
        free(m);
        free(copy);
        return -1;
    }
    memcpy(copy, data, len);
    *m = (nic_msg){NULL, copy, (uint32_t)len, 0, wr_id};
    nic_sync_lock(r->cq->sync);
    int had_work = nic_requester_has_work(r);
    if (r->q_tail)
        r->q_tail->next = m;
    else
        r->q_head = m;
    r->q_tail = m;
    if (has_now)
        unblocked(r, had_work, now);
    nic_sync_unlock(r->cq->sync);
    nic_sync_kick(r->cq->sync);
    return 0;
}

static void apply_port_change(nic_requester *r)
{
    r->tmpl = r->pending;
    r->port_change = 0;
    nic_cq_push(r->cq, NIC_CQ_PORT, r->user, 0, NULL, 0);
}

static void apply_port_change_if_drained(nic_requester *r)
{
    if (r->port_change && r->if_len == 0 && (r->q_head == NULL || r->q_head->offset == 0))
        apply_port_change(r);
}

int nic_requester_request_port(nic_requester *r, const uint8_t *hdr, size_t hdr_len)
{
    if (hdr_len != NIC_HDR_LEN)
        return -1;
    nic_sync_lock(r->cq->sync);
    memcpy(r->pending.hdr, hdr, NIC_HDR_LEN);
    r->port_change = 1;
    apply_port_change_if_drained(r);
    nic_sync_unlock(r->cq->sync);
    return 0;
}

void nic_requester_advance_rate(nic_requester *r, double now)
{
    nic_sync_lock(r->cq->sync);
    nic_dcqcn_advance(&r->rate, now);
    nic_sync_unlock(r->cq->sync);
}

int nic_requester_ready_at(const nic_requester *r, double *at)
{
    if (!nic_requester_has_work(r))
        return 0;
    *at = r->next_tx;
    return 1;
}

int nic_requester_sendable_at(const nic_requester *r, double *at)
{
    if (!nic_requester_has_work(r))
        return 0;
    *at = r->next_tx > r->unblocked_at ? r->next_tx : r->unblocked_at;
    return 1;
}

size_t nic_requester_frame_cap(const nic_requester *r)
{
    return NIC_HDR_LEN + r->mtu + NIC_ICRC_LEN;
}

static nic_seg *new_segment(nic_requester *r)
{
    nic_msg *m = r->q_head;
    if (m->offset == 0 && r->port_change)
        apply_port_change(r);
    uint32_t start = m->offset;
    uint32_t end = m->len - start > r->mtu ? start + r->mtu : m->len;
    int first = start == 0, last = end == m->len;
    uint8_t opcode = first ? (last ? NIC_SEND_ONLY : NIC_SEND_FIRST) : (last ? NIC_SEND_LAST : NIC_SEND_MIDDLE);
    m->offset = end;
    if (last) {
        r->q_head = m->next;
        if (r->q_head == NULL)
            r->q_tail = NULL;
        m->next = NULL;
    }
    nic_seg *s = seg_at(r, r->if_len);
    *s = (nic_seg){r->nxt, opcode, m, start, end};
    r->nxt = (r->nxt + 1) & NIC_PSN_MASK;
    r->if_len += 1;
    r->resend = r->if_len;
    return s;
}

size_t nic_requester_next_frame(nic_requester *r, double now, uint8_t *out, size_t cap)
{
    if (cap < nic_requester_frame_cap(r) || now < r->next_tx || !nic_requester_has_work(r))
        return 0;
    nic_seg *s;
    if (r->resend < r->if_len) {
        s = seg_at(r, r->resend);
        r->resend += 1;
        r->stats.retransmits += 1;
    } else {
        s = new_segment(r);
    }
    int last = is_last(s->opcode);
    r->since_ack_req += 1;
    /* Also ask when half a window has gone out unasked, so the window never stalls. */
    uint32_t half = r->window / 2 > 1 ? r->window / 2 : 1;
    int ackreq = last || r->since_ack_req >= (NIC_ACK_EVERY < half ? NIC_ACK_EVERY : half);
    if (ackreq)
        r->since_ack_req = 0;
    size_t len = nic_frame(&r->tmpl, s->opcode, s->psn, ackreq ? NIC_F_ACKREQ : 0, NULL, 0,
                           s->msg->data + s->start, s->end - s->start, out, cap);
    r->stats.packets += 1;
    r->stats.bytes += (int64_t)len;
    nic_dcqcn_on_sent(&r->rate, (int64_t)len, now);
    double gap = (double)(len * 8) / r->rate.rc;
    /* Pace from the later of now and the schedule: at most one frame time of credit
     * after a late wake-up, none for idle time. */
    r->next_tx = (r->next_tx > now - gap ? r->next_tx : now - gap) + gap;
    if (r->if_len == 1 && r->resend == 1)
        r->last_progress = now;     /* the first packet of an empty window: start the RTO */
    return len;
}

static void on_ack(nic_requester *r, uint32_t psn, int nak, double now)
{
    int64_t acked = (int64_t)nic_psn_diff(psn, r->una) + (nak ? 0 : 1);
    if (0 < acked && acked <= (int64_t)r->if_len) {
        for (int64_t i = 0; i < acked; i++) {
            nic_seg *s = seg_at(r, 0);
            r->if_head = (r->if_head + 1) % r->window;
            r->if_len -= 1;
            r->stats.acked_bytes += s->end - s->start;
            if (is_last(s->opcode)) {
                r->stats.messages_done += 1;
                nic_cq_push(r->cq, NIC_CQ_SEND, r->user, s->msg->wr_id, NULL, 0);
                free(s->msg->data);
                free(s->msg);
            }
        }
        r->una = (r->una + (uint32_t)acked) & NIC_PSN_MASK;
        r->resend = r->resend > acked ? r->resend - (uint32_t)acked : 0;
        r->last_progress = now;
        apply_port_change_if_drained(r);
    }
    if (nak && r->if_len && psn == r->una) {
        r->stats.naks += 1;
        r->resend = 0;
        r->last_progress = now;
    }
}

void nic_requester_on_ack(nic_requester *r, uint32_t psn, int nak, double now)
{
    int had_work = nic_requester_has_work(r);
    on_ack(r, psn & NIC_PSN_MASK, nak, now);
    unblocked(r, had_work, now);
}

void nic_requester_on_cnp(nic_requester *r, double now)
{
    r->stats.cnps += 1;
    nic_dcqcn_on_cnp(&r->rate, now);
}

int nic_requester_check_timeout(nic_requester *r, double now, double *at)
{
    if (r->if_len == 0)
        return 0;
    if (now - r->last_progress > r->rto) {
        int had_work = nic_requester_has_work(r);
        r->stats.timeouts += 1;
        r->resend = 0;
        unblocked(r, had_work, r->last_progress + r->rto);   /* when it fired */
        r->last_progress = now;
    }
    *at = r->last_progress + r->rto;
    return 1;
}
