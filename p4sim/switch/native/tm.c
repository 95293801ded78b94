/* The traffic manager: p4sim/switch/traffic_manager.py in C (tm.h says how the two are
 * kept equal). Each function names the Python method it is; the comments that explain
 * the model are there, not repeated here. */
#include "tm.h"
#include "pfc.h"

#include <stdlib.h>
#include <string.h>

#define EVENTS_MAX 64   /* kept until taken; older ones are overwritten past this */

typedef struct {
    void *item;
    int64_t enq_ts;
    uint32_t enq_qdepth;
    int32_t in_port;    /* -1: not lossless-accounted */
    uint32_t size;
} entry;

/* A growable ring: Python's deque of queue entries. */
struct p4n_fifo {
    entry *slots;
    uint32_t cap;       /* a power of two, or 0 */
    uint32_t head;
    uint32_t len;
};

struct p4n_tm {
    uint32_t priorities;
    uint32_t default_depth;
    double default_pps;
    p4n_tm_model model;
    double *bounds;
    p4n_tm_port *ports[P4N_TM_MAX_PORTS];
    uint16_t created[P4N_TM_MAX_PORTS];   /* in creation order (Python's dict order) */
    uint32_t n_ports;
    int pfc_on;
    uint32_t pfc_priorities;              /* bit p: lossless */
    int64_t pfc_xoff, pfc_xon, pfc_headroom;
    double pfc_watchdog_us;
    p4n_pause_fn send_pause;
    p4n_drop_fn drop;
    void *ctx;
    p4n_tm_event events[EVENTS_MAX];
    uint32_t n_events;
};

/* ---- FIFO */

static int fifo_push(p4n_fifo *q, entry e)
{
    if (q->len == q->cap) {
        uint32_t cap = q->cap ? q->cap * 2 : 16;
        entry *slots = malloc(sizeof(entry) * cap);
        if (!slots)
            return P4N_TM_NO_MEMORY;
        for (uint32_t i = 0; i < q->len; i++)
            slots[i] = q->slots[(q->head + i) & (q->cap - 1)];
        free(q->slots);
        q->slots = slots;
        q->cap = cap;
        q->head = 0;
    }
    q->slots[(q->head + q->len) & (q->cap - 1)] = e;
    q->len++;
    return 0;
}

static entry fifo_pop(p4n_fifo *q)
{
    entry e = q->slots[q->head];
    q->head = (q->head + 1) & (q->cap - 1);
    q->len--;
    return e;
}

/* ---- small helpers */

static double dmax(double a, double b) { return b > a ? b : a; }  /* Python's max(a, b) */

static void event(p4n_tm *tm, int kind, uint32_t port, uint32_t priority, uint32_t count,
                  double value)
{
    p4n_tm_event *ev = &tm->events[tm->n_events % EVENTS_MAX];
    ev->kind = kind;
    ev->port = port;
    ev->priority = priority;
    ev->count = count;
    ev->value = value;
    tm->n_events++;
}

static int lossless(const p4n_tm *tm, uint32_t priority)
{
    return tm->pfc_on && priority < P4N_PRIORITIES && (tm->pfc_priorities >> priority & 1);
}

/* ---- _Port */

/* _Port.serialisation_us */
static double serialisation_us(const p4n_tm_port *s, double size)
{
    double t = 0.0;
    if (s->byte_rate)
        t = size / s->byte_rate * 1e6;
    if (s->pkt_rate)
        t = dmax(t, 1e6 / s->pkt_rate);
    return t;
}

/* _Port.retime */
static void retime(p4n_tm_port *s)
{
    s->packet_time = serialisation_us(s, s->frame_bytes);
}

/* LatenessHistogram.add: bisect_left over the bounds. */
static void lateness_add(const p4n_tm *tm, p4n_tm_port *s, double lateness)
{
    if (lateness > s->lateness_max)
        s->lateness_max = lateness;
    uint32_t lo = 0, hi = tm->model.n_bounds;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (tm->bounds[mid] < lateness)
            lo = mid + 1;
        else
            hi = mid;
    }
    s->lateness[lo]++;
}

/* _Port.depart */
static void depart(const p4n_tm *tm, p4n_tm_port *s, int64_t now, double enq_ts, uint32_t sent)
{
    double serialisation = serialisation_us(s, sent);
    double scheduled = dmax(enq_ts, s->free_at);
    s->free_at = dmax(scheduled, now - tm->model.catchup_us) + serialisation;
    if (!s->packet_time)
        return;
    lateness_add(tm, s, (now - scheduled) / s->packet_time);
    if (enq_ts < s->last_departure &&
            now - s->last_departure < tm->model.burst_gap * s->last_serialisation)
        s->bursts++;
    s->last_departure = now;
    s->last_serialisation = serialisation;
}

/* _Port.quanta_us */
static double quanta_us(const p4n_tm *tm, const p4n_tm_port *s, uint32_t quanta)
{
    if (!s->byte_rate)
        return 0.0;
    return (double)((uint64_t)quanta * tm->model.quantum_bits) / 8 / s->byte_rate * 1e6;
}

/* _Port.head: the highest-priority non-empty queue not paused at now; -1 if none.
 * (priorities <= P4N_PRIORITIES: p4n_tm_new refuses more.) */
static int head(const p4n_tm *tm, const p4n_tm_port *s, double now)
{
    for (int p = (int)tm->priorities - 1; p >= 0; p--)
        if (s->queues[p].len && s->pfc.paused_until[p] <= now)
            return p;
    return -1;
}

/* TrafficManager._port: get or create. */
static p4n_tm_port *port_of(p4n_tm *tm, uint32_t port)
{
    if (port >= P4N_TM_MAX_PORTS)
        return NULL;
    p4n_tm_port *s = tm->ports[port];
    if (s)
        return s;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->queues = calloc(tm->priorities, sizeof(p4n_fifo));
    s->lateness = calloc(tm->model.n_bounds + 1, sizeof(uint64_t));
    if (!s->queues || !s->lateness) {
        free(s->queues);
        free(s->lateness);
        free(s);
        return NULL;
    }
    s->depth = tm->default_depth;
    s->frame_bytes = 1518;
    s->pkt_rate = tm->default_pps;
    retime(s);
    tm->ports[port] = s;
    tm->created[tm->n_ports++] = (uint16_t)port;
    return s;
}

static int port_error(uint32_t port)
{
    return port >= P4N_TM_MAX_PORTS ? P4N_TM_BAD_PORT : P4N_TM_NO_MEMORY;
}

/* ---- creation */

p4n_tm *p4n_tm_new(uint32_t priorities, uint32_t depth, double queue_rate_pps,
                   const p4n_tm_model *model)
{
    if (priorities < 1 || priorities > P4N_PRIORITIES)
        return NULL;
    p4n_tm *tm = calloc(1, sizeof(*tm));
    if (!tm)
        return NULL;
    tm->bounds = malloc(sizeof(double) * (model->n_bounds ? model->n_bounds : 1));
    if (!tm->bounds) {
        free(tm);
        return NULL;
    }
    memcpy(tm->bounds, model->bounds, sizeof(double) * model->n_bounds);
    tm->model = *model;
    tm->model.bounds = tm->bounds;
    tm->priorities = priorities;
    tm->default_depth = depth;
    tm->default_pps = queue_rate_pps;
    return tm;
}

void p4n_tm_free(p4n_tm *tm)
{
    if (!tm)
        return;
    for (uint32_t i = 0; i < tm->n_ports; i++) {
        p4n_tm_port *s = tm->ports[tm->created[i]];
        for (uint32_t p = 0; p < tm->priorities; p++)
            free(s->queues[p].slots);
        free(s->queues);
        free(s->lateness);
        free(s);
    }
    free(tm->bounds);
    free(tm);
}

void p4n_tm_set_callbacks(p4n_tm *tm, p4n_pause_fn send_pause, p4n_drop_fn drop, void *ctx)
{
    tm->send_pause = send_pause;
    tm->drop = drop;
    tm->ctx = ctx;
}

/* ---- configuration */

int p4n_tm_add_port(p4n_tm *tm, uint32_t port)
{
    return port_of(tm, port) ? 0 : port_error(port);
}

int p4n_tm_set_port_rate(p4n_tm *tm, uint32_t port, double bytes_per_s)
{
    p4n_tm_port *s = port_of(tm, port);
    if (!s)
        return port_error(port);
    s->byte_rate = bytes_per_s;
    retime(s);
    return 0;
}

int p4n_tm_set_frame_bytes(p4n_tm *tm, uint32_t port, uint32_t frame_bytes)
{
    p4n_tm_port *s = port_of(tm, port);
    if (!s)
        return port_error(port);
    s->frame_bytes = frame_bytes;
    retime(s);
    return 0;
}

int p4n_tm_set_queue_rate(p4n_tm *tm, int32_t port, double pps)
{
    if (port >= 0) {
        p4n_tm_port *s = port_of(tm, (uint32_t)port);
        if (!s)
            return port_error((uint32_t)port);
        s->pkt_rate = pps;
        retime(s);
        return 0;
    }
    tm->default_pps = pps;
    for (uint32_t i = 0; i < tm->n_ports; i++) {
        p4n_tm_port *s = tm->ports[tm->created[i]];
        s->pkt_rate = pps;
        retime(s);
    }
    return 0;
}

int p4n_tm_set_queue_depth(p4n_tm *tm, int32_t port, uint32_t packets)
{
    if (port >= 0) {
        p4n_tm_port *s = port_of(tm, (uint32_t)port);
        if (!s)
            return port_error((uint32_t)port);
        s->depth = packets;
        return 0;
    }
    tm->default_depth = packets;
    for (uint32_t i = 0; i < tm->n_ports; i++)
        tm->ports[tm->created[i]]->depth = packets;
    return 0;
}

/* TrafficManager._pause_out */
static void pause_out(p4n_tm *tm, uint32_t port, uint32_t priority, uint32_t quanta, double now)
{
    p4n_tm_port *s = tm->ports[port];
    s->pfc.pause_tx[priority]++;
    double lasts = quanta_us(tm, s, quanta);
    s->pfc.refresh_at[priority] = lasts ? now + tm->model.xoff_refresh * lasts : 0.0;
    s->free_at = dmax(s->free_at, now) + serialisation_us(s, tm->model.min_frame);
    if (tm->send_pause)
        tm->send_pause(tm->ctx, port, priority, quanta);
}

/* TrafficManager._release */
static void release(p4n_tm *tm, uint32_t in_port, uint32_t priority, uint32_t size, double now)
{
    p4n_port_pfc *ingress = &tm->ports[in_port]->pfc;
    ingress->ingress_bytes[priority] -= size;
    if (ingress->xoff[priority] && ingress->ingress_bytes[priority] <= tm->pfc_xon) {
        ingress->xoff[priority] = 0;
        pause_out(tm, in_port, priority, 0, now);
    }
}

int p4n_tm_set_pfc(p4n_tm *tm, int64_t now, int enabled, uint32_t priorities, int64_t xoff,
                   int64_t xon, int64_t headroom, double watchdog_us)
{
    uint32_t keep = enabled ? priorities : 0;
    for (uint32_t i = 0; i < tm->n_ports; i++) {
        uint32_t port = tm->created[i];
        p4n_tm_port *s = tm->ports[port];
        for (uint32_t p = 0; p < P4N_PRIORITIES; p++) {
            if (keep >> p & 1)
                continue;
            if (s->pfc.xoff[p]) {   /* no longer lossless: let the peer go */
                s->pfc.xoff[p] = 0;
                pause_out(tm, port, p, 0, now);
            }
            if (p4n_pfc_paused(&s->pfc, p, now))
                p4n_pfc_pause(&s->pfc, p, now, now);
            s->pfc.storm[p] = 0;
        }
    }
    tm->pfc_on = enabled;
    tm->pfc_priorities = priorities;
    tm->pfc_xoff = xoff;
    tm->pfc_xon = xon;
    tm->pfc_headroom = headroom;
    tm->pfc_watchdog_us = watchdog_us;
    return 0;
}

/* ---- data path */

int p4n_tm_enqueue(p4n_tm *tm, int64_t now, uint32_t port, uint32_t priority, void *item,
                   int64_t arrival, uint32_t size, int32_t in_port)
{
    p4n_tm_port *s = port_of(tm, port);
    if (!s)
        return port_error(port);
    if (priority >= tm->priorities) {
        s->drops++;
        if (!s->bad_priority_reported) {
            s->bad_priority_reported = 1;
            event(tm, P4N_TM_EV_BAD_PRIORITY, port, priority, 0, 0.0);
        }
        return 0;
    }
    p4n_fifo *queue = &s->queues[priority];
    uint32_t qdepth = queue->len;
    int is_lossless = in_port >= 0 && lossless(tm, priority);
    p4n_port_pfc *ingress = NULL;
    if (is_lossless) {
        if (s->pfc.storm[priority]) {
            s->drops++;
            s->pfc.storm_drops++;
            return 0;
        }
        p4n_tm_port *in = port_of(tm, (uint32_t)in_port);
        if (!in)
            return port_error((uint32_t)in_port);
        ingress = &in->pfc;
        if (ingress->ingress_bytes[priority] + size > tm->pfc_xoff + tm->pfc_headroom) {
            s->drops++;
            ingress->headroom_drops++;
            return 0;
        }
    } else if (qdepth >= s->depth) {
        s->drops++;
        return 0;
    }
    entry e = {item, arrival < now ? arrival : now, qdepth, is_lossless ? in_port : -1, size};
    if (fifo_push(queue, e))
        return P4N_TM_NO_MEMORY;
    s->busy = 1;
    if (is_lossless) {
        ingress->ingress_bytes[priority] += size;
        if (!ingress->xoff[priority] && ingress->ingress_bytes[priority] >= tm->pfc_xoff) {
            ingress->xoff[priority] = 1;
            pause_out(tm, (uint32_t)in_port, priority, tm->model.max_quanta, now);
        }
    }
    s->queued++;
    s->enqueued++;
    if (qdepth + 1 > s->max_qdepth)
        s->max_qdepth = qdepth + 1;
    return 1;
}

/* TrafficManager._storm: the watchdog's action. */
static void storm(p4n_tm *tm, uint32_t port, p4n_tm_port *s, uint32_t priority, double now)
{
    p4n_port_pfc *pfc = &s->pfc;
    pfc->storm[priority] = 1;
    pfc->storms++;
    double paused_for = now - pfc->paused_since[priority];
    p4n_pfc_pause(pfc, priority, now, now);
    p4n_fifo *queue = &s->queues[priority];
    uint32_t dropped = queue->len;
    while (queue->len) {
        entry e = fifo_pop(queue);
        if (e.in_port >= 0)
            release(tm, (uint32_t)e.in_port, priority, e.size, now);
        if (tm->drop)
            tm->drop(tm->ctx, e.item);
    }
    s->queued -= dropped;
    s->drops += dropped;
    pfc->storm_drops += dropped;
    event(tm, P4N_TM_EV_STORM, port, priority, dropped, paused_for);
}

/* TrafficManager._pfc_timers */
static void pfc_timers(p4n_tm *tm, double now)
{
    for (uint32_t i = 0; i < tm->n_ports; i++) {
        uint32_t port = tm->created[i];
        p4n_tm_port *s = tm->ports[port];
        for (uint32_t p = 0; p < P4N_PRIORITIES; p++) {
            if (!(tm->pfc_priorities >> p & 1))
                continue;
            if (s->pfc.xoff[p] && 0 < s->pfc.refresh_at[p] && s->pfc.refresh_at[p] <= now)
                pause_out(tm, port, p, tm->model.max_quanta, now);
            if (!tm->pfc_watchdog_us)
                continue;
            if (s->pfc.storm[p]) {
                if (now - s->pfc.last_pause_rx[p] >= tm->pfc_watchdog_us) {
                    s->pfc.storm[p] = 0;
                    event(tm, P4N_TM_EV_STORM_OVER, port, p, 0, tm->pfc_watchdog_us);
                }
            } else if (s->queues[p].len && p4n_pfc_paused(&s->pfc, p, now) &&
                       now - s->pfc.paused_since[p] >= tm->pfc_watchdog_us) {
                storm(tm, port, s, p, now);
            }
        }
    }
}

void p4n_tm_service(p4n_tm *tm, int64_t at, int64_t now, p4n_transmit_fn transmit, void *ctx)
{
    if (at > now)
        at = now;
    if (tm->pfc_on)
        pfc_timers(tm, (double)at);
    /* The ports busy at the call, ascending (traffic_manager.py: sorted(self._busy)):
     * the created ports only, sorted in place -- this runs once per received frame, and
     * a scan of all P4N_TM_MAX_PORTS numbers was an eighth of the native loop's time. */
    uint16_t busy[P4N_TM_MAX_PORTS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < tm->n_ports; i++) {
        uint16_t port = tm->created[i];
        if (!tm->ports[port]->busy)
            continue;
        uint32_t j = n++;
        while (j > 0 && busy[j - 1] > port) {
            busy[j] = busy[j - 1];
            j--;
        }
        busy[j] = port;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t port = busy[i];
        p4n_tm_port *s = tm->ports[port];
        while (s->queued) {
            if (at < s->free_at)
                break;
            int priority = head(tm, s, (double)at);
            if (priority < 0)
                break;   /* every queue with packets is paused */
            p4n_fifo *queue = &s->queues[priority];
            entry e = fifo_pop(queue);
            s->queued--;
            if (e.in_port >= 0)
                release(tm, (uint32_t)e.in_port, (uint32_t)priority, e.size, (double)now);
            p4n_dequeued d = {port, (uint32_t)priority, e.item, e.enq_ts, e.enq_qdepth,
                              queue->len, now - e.enq_ts};
            uint32_t sent = transmit(ctx, &d);
            if (sent) {
                s->sent_packets++;
                s->sent_bytes += sent;
                depart(tm, s, now, dmax((double)e.enq_ts, s->pfc.paused_until[priority]), sent);
            }
        }
        if (!s->queued)
            s->busy = 0;
    }
}

/* TrafficManager._pfc_deadlines, folded into the minimum *due (has: one was found). */
static void pfc_deadlines(const p4n_tm *tm, double now, double *due, int *has)
{
    for (uint32_t i = 0; i < tm->n_ports; i++) {
        const p4n_tm_port *s = tm->ports[tm->created[i]];
        for (uint32_t p = 0; p < P4N_PRIORITIES; p++) {
            if (!(tm->pfc_priorities >> p & 1))
                continue;
            double t[2];
            int k = 0;
            if (s->pfc.xoff[p] && s->pfc.refresh_at[p] > 0)
                t[k++] = s->pfc.refresh_at[p];
            if (tm->pfc_watchdog_us) {
                if (s->pfc.storm[p])
                    t[k++] = s->pfc.last_pause_rx[p] + tm->pfc_watchdog_us;
                else if (s->queues[p].len && p4n_pfc_paused(&s->pfc, p, now))
                    t[k++] = s->pfc.paused_since[p] + tm->pfc_watchdog_us;
            }
            for (int j = 0; j < k; j++)
                if (!*has || t[j] < *due) {
                    *due = t[j];
                    *has = 1;
                }
        }
    }
}

int p4n_tm_next_deadline(p4n_tm *tm, int64_t now, int64_t *deadline)
{
    double best = 0.0;
    int has = 0;
    /* The created ports only: this runs before every sleep of the loop, and a walk over
     * all P4N_TM_MAX_PORTS numbers cost a visible share of a fabric switch's wake-up.
     * The minimum does not depend on the order. */
    for (uint32_t i = 0; i < tm->n_ports; i++) {
        const p4n_tm_port *s = tm->ports[tm->created[i]];
        if (!s->busy)
            continue;
        double due = s->free_at;
        if (tm->pfc_on) {
            /* A paused queue waits for its pause to run out. */
            double until = 0.0;
            int any = 0;
            for (uint32_t q = 0; q < tm->priorities; q++)
                if (s->queues[q].len && (!any || s->pfc.paused_until[q] < until)) {
                    until = s->pfc.paused_until[q];
                    any = 1;
                }
            if (any)
                due = dmax(due, until);
        }
        if (!has || due < best) {
            best = due;
            has = 1;
        }
    }
    if (tm->pfc_on)
        pfc_deadlines(tm, (double)now, &best, &has);
    if (has)
        *deadline = (int64_t)best + 1;   /* int() truncates toward zero, as the cast */
    return has;
}

int p4n_tm_receive_pause(p4n_tm *tm, int64_t now, uint32_t port, uint32_t priority,
                         uint32_t quanta)
{
    p4n_tm_port *s = port_of(tm, port);
    if (!s)
        return port_error(port);
    if (priority >= P4N_PRIORITIES)
        return 0;
    s->pfc.pause_rx[priority]++;
    s->pfc.last_pause_rx[priority] = (double)now;
    if (!lossless(tm, priority) || s->pfc.storm[priority])
        return 0;
    if (quanta && !s->byte_rate && !s->no_rate_pause_reported) {
        s->no_rate_pause_reported = 1;
        event(tm, P4N_TM_EV_PAUSE_NO_RATE, port, priority, 0, 0.0);
    }
    p4n_pfc_pause(&s->pfc, priority, (double)now, (double)now + quanta_us(tm, s, quanta));
    return 0;
}

int p4n_tm_drain(p4n_tm *tm, void **items, int max)
{
    int n = 0;
    for (uint32_t i = 0; i < tm->n_ports && n < max; i++) {
        p4n_tm_port *s = tm->ports[tm->created[i]];
        for (uint32_t p = 0; p < tm->priorities && n < max; p++) {
            p4n_fifo *queue = &s->queues[p];
            while (queue->len && n < max) {
                entry e = fifo_pop(queue);
                if (e.in_port >= 0)
                    tm->ports[e.in_port]->pfc.ingress_bytes[p] -= e.size;
                s->queued--;
                items[n++] = e.item;
            }
        }
        if (!s->queued)
            s->busy = 0;
    }
    return n;
}

/* ---- observation */

const p4n_tm_port *p4n_tm_port_get(const p4n_tm *tm, uint32_t port)
{
    return port < P4N_TM_MAX_PORTS ? tm->ports[port] : NULL;
}

uint32_t p4n_tm_queue_len(const p4n_tm *tm, uint32_t port, uint32_t priority)
{
    const p4n_tm_port *s = p4n_tm_port_get(tm, port);
    return s && priority < tm->priorities ? s->queues[priority].len : 0;
}

int p4n_tm_ports(const p4n_tm *tm, uint32_t *out, int max)
{
    int n = 0;
    for (uint32_t port = 0; port < P4N_TM_MAX_PORTS && n < max; port++)
        if (tm->ports[port])
            out[n++] = port;
    return n;
}

uint32_t p4n_tm_lateness_buckets(const p4n_tm *tm)
{
    return tm->model.n_bounds + 1;
}

uint64_t p4n_tm_backlog(const p4n_tm *tm)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < tm->n_ports; i++)
        total += tm->ports[tm->created[i]]->queued;
    return total;
}

double p4n_tm_packet_time_us(const p4n_tm *tm)
{
    double best = 0.0;
    for (uint32_t i = 0; i < tm->n_ports; i++) {
        double t = tm->ports[tm->created[i]]->packet_time;
        if (t && (!best || t < best))
            best = t;
    }
    return best;
}

int p4n_tm_events(p4n_tm *tm, p4n_tm_event *out, int max)
{
    uint32_t first = tm->n_events > EVENTS_MAX ? tm->n_events - EVENTS_MAX : 0;
    int n = 0;
    for (uint32_t i = first; i < tm->n_events && n < max; i++)
        out[n++] = tm->events[i % EVENTS_MAX];
    tm->n_events = 0;
    return n;
}

uint32_t p4n_tm_pending_events(const p4n_tm *tm)
{
    return tm->n_events;
}
