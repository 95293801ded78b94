/* One agent's NICs: engine.py's NicPort and the receive part of Engine.turn, in C.
 *
 * Each port reads two PACKET_RX_RINGs (TPACKET_V2) that the Python InterfacePort set
 * up and mapped: IPv4 (RoCE) and MAC control (PFC PAUSE). A call to
 * nic_device_receive handles the frames waiting in all of them in kernel-timestamp
 * order (merged across rings, issue 29), each at its arrival time in emulated seconds
 * -- (stamp - origin) / (dilation * 1e9), emulation/clock.py's arithmetic. A frame for
 * a QP the device does not know stops the call with that frame still in its ring:
 * the library decides (creates the QP, or skips the frame) and calls again.
 *
 * nic_device_service sends what the line-rate pacer and the QPs' DCQCN pacers allow,
 * round robin over a port's QPs, none of the QPs' priority while it is paused;
 * answers (ACK/NAK/CNP) of a paused priority wait in a held queue; then the RTOs run.
 * It returns when the next thing is due, so the loop sleeps until then.
 *
 * Both run on the device's own thread (nic_device_start), under the device's lock
 * (sync.h), so frames leave and are handled on time while the library's thread runs
 * Python; the library posts, adds QPs and drains completions through calls that take
 * the lock, and sleeps on the notify eventfd. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include "nic.h"
#include "sync.h"

/* The sockets one thread polls: a kick eventfd and two per port. */
#define MAX_PORTS 64

/* struct tpacket2_hdr and what follows it (linux/if_packet.h): read by offset, every
 * offset checked against the slot. */
#define TP_STATUS_USER 1u
#define TP_STATUS_COPY (1u << 1)
#define TP_STATUS_VLAN_VALID (1u << 4)
#define TP_LEN_AT 4
#define TP_SNAPLEN_AT 8
#define TP_MAC_AT 12
#define TP_SEC_AT 16
#define TP_NSEC_AT 20
#define TP_HDR_LEN 32
#define SLL_PKTTYPE_AT (TP_HDR_LEN + 10)
#define PACKET_OUTGOING 4

/* The ring's headers are in the host's byte order. */
static inline uint32_t host32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline uint32_t host16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

static int priority_of(const uint8_t *frame, size_t len)
{
    if (len <= NIC_IP_OFF + NIC_TOS_AT)
        return 0;
    return (frame[NIC_IP_OFF + NIC_TOS_AT] >> NIC_DSCP_SHIFT) >> NIC_PRIORITY_SHIFT;
}

nic_device *nic_device_new(int64_t origin_ns, double dilation, double frame_time, int max_rx_batch,
                           int max_tx_batch, double catchup_frames)
{
    if (!(dilation >= 1.0) || !(frame_time > 0) || max_rx_batch < 1 || max_tx_batch < 1)
        return NULL;
    nic_device *d = calloc(1, sizeof *d);
    nic_sync *sync = calloc(1, sizeof *sync);
    if (d == NULL || sync == NULL) {
        free(d);
        free(sync);
        return NULL;
    }
    sync->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    sync->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (sync->kick_fd < 0 || sync->notify_fd < 0 || pthread_mutex_init(&sync->lock, NULL) != 0) {
        if (sync->kick_fd >= 0)
            close(sync->kick_fd);
        if (sync->notify_fd >= 0)
            close(sync->notify_fd);
        free(d);
        free(sync);
        return NULL;
    }
    d->sync = d->cq.sync = sync;
    d->need_qpn = NIC_NO_QPN;
    d->origin_ns = origin_ns;
    d->dilation = dilation;
    d->frame_time = frame_time;
    d->max_rx_batch = max_rx_batch;
    d->max_tx_batch = max_tx_batch;
    d->catchup_frames = catchup_frames;
    d->woke = -INFINITY;
    return d;
}

void nic_device_free(nic_device *d)
{
    if (d == NULL)
        return;
    nic_device_stop(d);
    close(d->sync->kick_fd);
    close(d->sync->notify_fd);
    pthread_mutex_destroy(&d->sync->lock);
    free(d->sync);
    for (size_t i = 0; i < d->n_ports; i++) {
        free(d->ports[i].reqs);
        free(d->ports[i].held);
    }
    free(d->ports);
    free(d->qps);
    free(d->txbuf);
    nic_cq_free(&d->cq);
    free(d);
}

static int ring_ok(const nic_ring *r)
{
    return r->base != NULL && r->frame_size > SLL_PKTTYPE_AT && r->block_size >= r->frame_size &&
           r->frames > 0 && (size_t)r->frames <= (r->len / r->block_size) * (r->block_size / r->frame_size);
}

int nic_device_add_port(nic_device *d, int fd, int pause_fd, nic_ring data, nic_ring pause,
                        const uint8_t *ip, double line_rate, int priority)
{
    if (!ring_ok(&data) || !ring_ok(&pause) || !(line_rate > 0) || priority < 0 || priority >= NIC_PRIORITIES ||
        d->n_ports >= MAX_PORTS || d->sync->running)
        return -1;
    nic_port *ports = realloc(d->ports, (d->n_ports + 1) * sizeof *ports);
    if (ports == NULL)
        return -1;
    d->ports = ports;
    nic_port *p = &ports[d->n_ports];
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->pause_fd = pause_fd;
    p->data = data;
    p->pause = pause;
    memcpy(p->ip, ip, 4);
    p->line_rate = line_rate;
    p->priority = priority;
    for (int i = 0; i < NIC_PRIORITIES; i++)
        p->paused_until[i] = -INFINITY;
    p->free_at = -INFINITY;
    nic_lateness_init(&p->tx_lateness, d->frame_time);
    nic_lateness_init(&p->rx_lateness, d->frame_time);
    return (int)d->n_ports++;
}

/* ---- the QP table: (port, QPN) -> QP, open addressing ------------------------------ */

static uint64_t qp_key(uint32_t port, uint32_t qpn) { return (uint64_t)port << 32 | qpn; }

static nic_qp *qp_find(const nic_device *d, uint32_t port, uint32_t qpn)
{
    if (d->qp_cap == 0)
        return NULL;
    uint64_t key = qp_key(port, qpn);
    for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> 40 & (d->qp_cap - 1);; i = (i + 1) & (d->qp_cap - 1)) {
        nic_qp *q = &d->qps[i];
        if (q->used == 0)
            return NULL;
        if (q->key == key)
            return q;
    }
}

static int qp_insert(nic_device *d, nic_qp q)
{
    if (2 * (d->n_qps + 1) > d->qp_cap) {
        size_t cap = d->qp_cap ? 2 * d->qp_cap : 64;
        nic_qp *old = d->qps, *qps = calloc(cap, sizeof *qps);
        if (qps == NULL)
            return -1;
        size_t old_cap = d->qp_cap;
        d->qps = qps;
        d->qp_cap = cap;
        d->n_qps = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].used)
                qp_insert(d, old[i]);
        free(old);
    }
    for (size_t i = (q.key * 0x9E3779B97F4A7C15ull) >> 40 & (d->qp_cap - 1);; i = (i + 1) & (d->qp_cap - 1)) {
        if (!d->qps[i].used) {
            d->qps[i] = q;
            d->n_qps++;
            return 0;
        }
    }
}

static int add_qp(nic_device *d, uint32_t port, uint32_t qpn, nic_requester *req, nic_responder *resp)
{
    if (port >= d->n_ports || req == NULL || resp == NULL || qp_find(d, port, qpn) != NULL)
        return -1;
    nic_port *p = &d->ports[port];
    if (p->n_reqs == p->cap_reqs) {
        size_t cap = p->cap_reqs ? 2 * p->cap_reqs : 16;
        nic_requester **reqs = realloc(p->reqs, cap * sizeof *reqs);
        if (reqs == NULL)
            return -1;
        p->reqs = reqs;
        p->cap_reqs = cap;
    }
    if (qp_insert(d, (nic_qp){qp_key(port, qpn), 1, req, resp}) != 0)
        return -1;
    p->reqs[p->n_reqs++] = req;
    size_t cap = nic_requester_frame_cap(req);
    if (cap > d->txcap) {
        uint8_t *buf = realloc(d->txbuf, cap);
        if (buf == NULL)
            return -1;
        d->txbuf = buf;
        d->txcap = cap;
    }
    return 0;
}

int nic_device_add_qp(nic_device *d, uint32_t port, uint32_t qpn, nic_requester *req, nic_responder *resp)
{
    /* A QP of another device's queue would take another lock than this device's. */
    if (req == NULL || resp == NULL || req->cq != &d->cq || resp->cq != &d->cq)
        return -1;
    nic_sync_lock(d->sync);
    int rc = add_qp(d, port, qpn, req, resp);
    nic_sync_unlock(d->sync);
    nic_sync_kick(d->sync);
    return rc;
}

/* ---- transmit ---------------------------------------------------------------------- */

static void transmit(nic_port *p, const uint8_t *frame, size_t len)
{
    /* A full socket buffer or a link that is down loses the frame, as a NIC's full
     * ring would; go-back-N recovers. */
    if (send(p->fd, frame, len, MSG_DONTWAIT) < 0) {
        p->tx_errors += 1;
        p->tx_errno = errno;
    }
}

/* A responder frame: now, or held while its priority is paused. */
static void reply(nic_port *p, const uint8_t *frame, size_t len, double now)
{
    if (p->n_held == 0 && !(p->paused_until[priority_of(frame, len)] > now)) {
        transmit(p, frame, len);
        return;
    }
    if (p->held_head + p->n_held == p->cap_held) {
        if (p->held_head > 0) {         /* room at the front: move the queue there */
            memmove(p->held, p->held + p->held_head, p->n_held * sizeof *p->held);
            p->held_head = 0;
        } else {
            size_t cap = p->cap_held ? 2 * p->cap_held : 16;
            nic_held *held = realloc(p->held, cap * sizeof *held);
            if (held == NULL) {
                p->tx_errors += 1;      /* lost, like a frame the kernel refused */
                return;
            }
            p->held = held;
            p->cap_held = cap;
        }
    }
    nic_held *h = &p->held[p->held_head + p->n_held];
    if (len > sizeof h->frame)
        len = sizeof h->frame;          /* never: answers are NIC_SMALL_FRAME at most */
    memcpy(h->frame, frame, len);
    h->len = len;
    p->n_held++;
}

static int pump(nic_device *d, nic_port *p, double now)
{
    while (p->n_held) {
        nic_held *h = &p->held[p->held_head];
        if (p->paused_until[priority_of(h->frame, h->len)] > now)
            break;
        transmit(p, h->frame, h->len);
        p->n_held--;
        p->held_head = p->n_held ? p->held_head + 1 : 0;
    }
    if (p->paused_until[p->priority] > now)
        return 0;
    int sent = 0;
    size_t n = p->n_reqs;
    while (sent < d->max_tx_batch && p->next_tx <= now && n) {
        size_t k;
        for (k = 0; k < n; k++) {
            nic_requester *r = p->reqs[(p->rr + k) % n];
            double sendable;
            if (!nic_requester_sendable_at(r, &sendable))
                continue;
            size_t len = nic_requester_next_frame(r, now, d->txbuf, d->txcap);
            if (len == 0)
                continue;
            p->rr = (p->rr + k + 1) % n;
            transmit(p, d->txbuf, len);
            double sched = p->free_at;
            if (sendable > sched)
                sched = sendable;
            if (p->paused_until[p->priority] > sched)
                sched = p->paused_until[p->priority];
            nic_lateness_add(&p->tx_lateness, now - sched);
            double gap = (double)(len * 8) / p->line_rate;
            p->free_at = now + gap;
            double from = now - d->catchup_frames * gap;
            p->next_tx = (p->next_tx > from ? p->next_tx : from) + gap;
            sent++;
            break;
        }
        if (k == n)
            break;
    }
    return sent;
}

/* engine.py's NicPort.ready_at: 1 and *at, or 0 when nothing is due. */
static int port_ready_at(const nic_port *p, double *at)
{
    int has = 0;
    double first = 0;
    for (size_t i = 0; i < p->n_reqs; i++) {
        double t;
        if (nic_requester_ready_at(p->reqs[i], &t) && (!has || t < first)) {
            first = t;
            has = 1;
        }
    }
    double due = 0;
    if (has) {
        due = p->next_tx;
        if (first > due)
            due = first;
        if (p->paused_until[p->priority] > due)
            due = p->paused_until[p->priority];
    }
    if (p->n_held) {
        const nic_held *h = &p->held[p->held_head];
        double resume = p->paused_until[priority_of(h->frame, h->len)];
        due = has && due < resume ? due : resume;
        has = 1;
    }
    *at = due;
    return has;
}

int nic_device_service(nic_device *d, double now, double *due)
{
    int has = 0;
    double first = 0, t;
    /* Timeouts first: a go-back leaves in this call's pump. Fired after it, its frames
     * waited for the next wake-up -- a whole RTO later when nothing else arrived (a
     * flow whose every frame in flight was lost, with its peers waiting on it). */
    for (size_t i = 0; i < d->n_ports; i++)
        for (size_t k = 0; k < d->ports[i].n_reqs; k++)
            nic_requester_check_timeout(d->ports[i].reqs[k], now, &t);
    for (size_t i = 0; i < d->n_ports; i++) {
        d->tx_frames += pump(d, &d->ports[i], now);
        if (port_ready_at(&d->ports[i], &t) && (!has || t < first)) {
            first = t;
            has = 1;
        }
    }
    for (size_t i = 0; i < d->n_ports; i++) {
        nic_port *p = &d->ports[i];
        for (size_t k = 0; k < p->n_reqs; k++)
            if (nic_requester_check_timeout(p->reqs[k], now, &t) && (!has || t < first)) {
                first = t;
                has = 1;
            }
    }
    *due = first;
    return has;
}

/* ---- receive ----------------------------------------------------------------------- */

static uint8_t *slot(const nic_ring *r, uint32_t i)
{
    uint32_t per_block = r->block_size / r->frame_size;
    return r->base + (size_t)(i / per_block) * r->block_size + (size_t)(i % per_block) * r->frame_size;
}

static int slot_ready(const nic_ring *r)
{
    return __atomic_load_n((uint32_t *)slot(r, r->next), __ATOMIC_ACQUIRE) & TP_STATUS_USER;
}

static void slot_release(nic_ring *r)
{
    __atomic_store_n((uint32_t *)slot(r, r->next), 0, __ATOMIC_RELEASE);
    r->next = (r->next + 1) % r->frames;
}

static int64_t slot_stamp(const nic_ring *r, int64_t realtime_ahead)
{
    const uint8_t *h = slot(r, r->next);
    return (int64_t)host32(h + TP_SEC_AT) * 1000000000 + host32(h + TP_NSEC_AT) - realtime_ahead;
}

/* The frame in the ring's head slot: its bytes, or NULL when it is to be dropped
 * unread (our own transmission, a frame too big for the slot, a VLAN-tagged one:
 * none is a RoCE frame of this NIC). */
static const uint8_t *slot_frame(nic_ring *r, int fd, size_t *len)
{
    const uint8_t *h = slot(r, r->next);
    uint32_t status = host32(h), wire_len = host32(h + TP_LEN_AT), snaplen = host32(h + TP_SNAPLEN_AT),
             mac = host16(h + TP_MAC_AT);
    if (status & TP_STATUS_COPY) {
        /* A frame too big for a slot waits whole in the socket's queue: read it away. */
        uint8_t scratch[64];
        (void)recv(fd, scratch, sizeof scratch, MSG_DONTWAIT | MSG_TRUNC);
        return NULL;
    }
    if (h[SLL_PKTTYPE_AT] == PACKET_OUTGOING || status & TP_STATUS_VLAN_VALID || snaplen < wire_len ||
        mac > r->frame_size || snaplen > r->frame_size - mac)
        return NULL;
    *len = snaplen;
    return h + mac;
}

static void on_pause(nic_port *p, const uint8_t *f, size_t len, double at)
{
    /* p4sim/switch/pause.py's parse_pause: a classic PAUSE speaks for every priority,
     * a PFC frame for those of its class-enable vector. */
    if (len < 16 || be16(f + 12) != NIC_ETHERTYPE_MAC_CONTROL)
        return;
    uint32_t opcode = be16(f + 14), vector;
    uint32_t quanta[NIC_PRIORITIES];
    if (opcode == NIC_OPCODE_PAUSE && len >= 18) {
        vector = (1u << NIC_PRIORITIES) - 1;
        for (int i = 0; i < NIC_PRIORITIES; i++)
            quanta[i] = be16(f + 16);
    } else if (opcode == NIC_OPCODE_PFC && len >= 18 + 2 * NIC_PRIORITIES) {
        vector = be16(f + 16);
        for (int i = 0; i < NIC_PRIORITIES; i++)
            quanta[i] = be16(f + 18 + 2 * i);
    } else {
        return;
    }
    p->pause_rx += 1;
    for (int i = 0; i < NIC_PRIORITIES; i++) {
        if (!(vector >> i & 1))
            continue;
        double until = at + (double)(quanta[i] * NIC_QUANTUM_BITS) / p->line_rate;
        if (i == p->priority) {
            /* Paused time is booked up to the pause's end; a resume or a refresh
             * replaces the part not yet lived. */
            double left = p->paused_until[i] - at;
            p->paused_s += until - at - (left > 0.0 ? left : 0.0);
        }
        p->paused_until[i] = until;
    }
}

/* 1: handled (the slot may go), 0: a QP the device does not know (d->need_* set). */
static int on_data(nic_device *d, uint32_t port, const uint8_t *f, size_t len, double at, double now)
{
    nic_port *p = &d->ports[port];
    nic_parsed pkt;
    int ours = nic_parse(f, len, &pkt) && memcmp(f + NIC_IP_OFF + NIC_DST_IP_AT, p->ip, 4) == 0;
    nic_qp *q = ours ? qp_find(d, port, pkt.dqpn) : NULL;
    if (ours && q == NULL) {
        d->need_port = port;
        d->need_qpn = pkt.dqpn;
        return 0;
    }
    d->rx_frames += 1;
    nic_lateness_add(&p->rx_lateness, now - at);
    if (!ours) {
        d->rx_ignored += 1;
        return 1;
    }
    if (pkt.opcode == NIC_ACKNOWLEDGE) {
        nic_requester_on_ack(q->req, pkt.psn, (pkt.syndrome & 0xE0) == NIC_AETH_NAK_SEQ, at);
    } else if (pkt.opcode == NIC_CNP) {
        nic_requester_on_cnp(q->req, at);
    } else {
        nic_reply out;
        nic_responder_on_frame(q->resp, f, len, &pkt, at, &out);
        for (int i = 0; i < out.n; i++)
            reply(p, out.frame[i], out.len[i], now);
    }
    return 1;
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int nic_device_receive(nic_device *d, double now)
{
    /* Packet sockets stamp in CLOCK_REALTIME; the emulation clock is CLOCK_MONOTONIC. */
    int64_t realtime_ahead = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
    int handled = 0, limit = d->max_rx_batch * (int)(d->n_ports ? d->n_ports : 1);
    d->need_qpn = NIC_NO_QPN;
    d->rx_now = now;
    while (handled < limit) {
        /* The earliest arrival waiting in any ring (ties: the lower port, PAUSE first). */
        nic_ring *best = NULL;
        uint32_t best_port = 0;
        int64_t best_stamp = 0;
        for (uint32_t i = 0; i < d->n_ports; i++) {
            nic_ring *rings[2] = {&d->ports[i].pause, &d->ports[i].data};
            for (int k = 0; k < 2; k++) {
                if (!slot_ready(rings[k]))
                    continue;
                int64_t stamp = slot_stamp(rings[k], realtime_ahead);
                if (best == NULL || stamp < best_stamp) {
                    best = rings[k];
                    best_port = i;
                    best_stamp = stamp;
                }
            }
        }
        if (best == NULL)
            break;
        nic_port *p = &d->ports[best_port];
        double at = (double)(best_stamp - d->origin_ns) / (d->dilation * 1e9);
        size_t len = 0;
        const uint8_t *f = slot_frame(best, p->fd, &len);
        if (f != NULL) {
            if (best == &p->pause)
                on_pause(p, f, len, at);
            else if (!on_data(d, best_port, f, len, at, now))
                return handled;         /* the library decides about this QP */
        }
        slot_release(best);
        handled++;
    }
    return handled;
}

int nic_device_skip(nic_device *d)
{
    /* The frame a receive stopped at, for a QP the library will not have: ignored. */
    nic_sync_lock(d->sync);
    if (d->need_qpn == NIC_NO_QPN) {
        nic_sync_unlock(d->sync);
        return -1;
    }
    nic_port *p = &d->ports[d->need_port];
    d->rx_frames += 1;
    d->rx_ignored += 1;
    int64_t realtime_ahead = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
    double at = (double)(slot_stamp(&p->data, realtime_ahead) - d->origin_ns) / (d->dilation * 1e9);
    nic_lateness_add(&p->rx_lateness, d->rx_now - at);
    slot_release(&p->data);
    d->need_qpn = NIC_NO_QPN;
    nic_sync_unlock(d->sync);
    nic_sync_kick(d->sync);
    return 0;
}

uint32_t nic_device_need(nic_device *d, uint32_t *port)
{
    nic_sync_lock(d->sync);
    uint32_t qpn = d->need_qpn;
    *port = d->need_port;
    nic_sync_unlock(d->sync);
    return qpn;
}

int nic_device_error(nic_device *d)
{
    nic_sync_lock(d->sync);
    int err = d->sync->error;
    nic_sync_unlock(d->sync);
    return err;
}

int nic_device_notify_fd(const nic_device *d) { return d->sync->notify_fd; }

/* ---- the loop ---------------------------------------------------------------------- */

static double device_now(const nic_device *d)
{
    return (double)(clock_ns(CLOCK_MONOTONIC) - d->origin_ns) / (d->dilation * 1e9);
}

/* A socket that polls as failed (a link that went down) has its error cleared, or it
 * would wake every poll. */
static void clear_error(int fd)
{
    int err = 0;
    socklen_t len = sizeof err;
    (void)getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
}

/* The library has something to do: wake it, once until it drains the queue. */
static void notify(nic_device *d)
{
    nic_sync *s = d->sync;
    if ((d->cq.n || d->cq.oom || d->need_qpn != NIC_NO_QPN || s->error) && !s->notified) {
        s->notified = 1;
        nic_sync_signal(s->notify_fd);
    }
}

static void *loop(void *arg)
{
    nic_device *d = arg;
    nic_sync *s = d->sync;
    struct pollfd fds[1 + 2 * MAX_PORTS];
    nic_sync_lock(s);
    size_t nfds = 1 + 2 * d->n_ports;
    fds[0] = (struct pollfd){.fd = s->kick_fd, .events = POLLIN};
    for (size_t i = 0; i < d->n_ports; i++) {
        fds[1 + 2 * i] = (struct pollfd){.fd = d->ports[i].fd, .events = POLLIN};
        fds[2 + 2 * i] = (struct pollfd){.fd = d->ports[i].pause_fd, .events = POLLIN};
    }
    while (!s->stop) {
        double now = device_now(d), due;
        d->woke = now;
        d->wakeups++;
        if (d->need_qpn != NIC_NO_QPN && qp_find(d, d->need_port, d->need_qpn) != NULL)
            d->need_qpn = NIC_NO_QPN;       /* the library made that QP: receive it */
        if (d->need_qpn == NIC_NO_QPN)
            nic_device_receive(d, now);
        int has = nic_device_service(d, device_now(d), &due);
        notify(d);
        now = device_now(d);
        double t = has ? due : INFINITY;
        size_t n = nfds;
        if (t <= d->woke + s->quantum || d->need_qpn != NIC_NO_QPN) {
            /* due within the quantum: wait for its end, and meanwhile only a kick wakes
             * the loop (frames wait in the rings, with their arrival times); waiting
             * for the library's QP, the rings are not read at all */
            if (t <= d->woke + s->quantum)
                t = d->woke + s->quantum;
            n = 1;
        }
        struct timespec ts, *timeout = NULL;
        if (isfinite(t)) {
            double wall = (t - now) * d->dilation;
            if (wall <= 0)
                continue;
            ts.tv_sec = (time_t)wall;
            ts.tv_nsec = (long)((wall - (double)ts.tv_sec) * 1e9);
            timeout = &ts;
        }
        nic_sync_unlock(s);
        int ready = ppoll(fds, n, timeout, NULL);
        int err = errno;
        nic_sync_lock(s);
        if (ready < 0 && err != EINTR) {
            s->error = err;
            notify(d);
            break;
        }
        if (ready > 0 && fds[0].revents) {
            uint64_t count;
            (void)!read(s->kick_fd, &count, sizeof count);
        }
        for (size_t i = 1; ready > 0 && i < n; i++)
            if (fds[i].revents & POLLERR)
                clear_error(fds[i].fd);
    }
    nic_sync_unlock(s);
    return NULL;
}

int nic_device_start(nic_device *d, double quantum)
{
    nic_sync *s = d->sync;
    if (s->running || !(quantum >= 0))
        return -1;
    s->quantum = quantum;
    s->stop = 0;
    s->error = 0;
    /* Signals stay with the library's thread (Python's handlers run there). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, loop, d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -1;
    s->running = 1;
    /* The thread inherited the caller's real-time priority; the caller, whose work
     * can wait, goes one below it, so the NICs run first on a core they share. */
    int policy;
    struct sched_param param;
    if (pthread_getschedparam(pthread_self(), &policy, &param) == 0 && (policy == SCHED_RR || policy == SCHED_FIFO) &&
        param.sched_priority > sched_get_priority_min(policy)) {
        param.sched_priority -= 1;
        pthread_setschedparam(pthread_self(), policy, &param);
    }
    return 0;
}

void nic_device_stop(nic_device *d)
{
    nic_sync *s = d->sync;
    if (!s->running)
        return;
    nic_sync_lock(s);
    s->stop = 1;
    nic_sync_unlock(s);
    nic_sync_kick(s);
    pthread_join(s->thread, NULL);
    s->running = 0;
}
