/* The native device loop (loop.h): device.py's Device in C. Each function names the
 * Device method it is; the model is explained there. */
#define _GNU_SOURCE
#include "loop.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "pause.h"
#include "pcap.h"
#include "pipeline.h"
#include "ports.h"
#include "tm.h"

#define MAX_GENS 16            /* pipelines whose jobs may still be queued */
#define MAX_HANDOFFS 4096      /* one ingress or egress run's copies (NativeSwitch's) */
#define FRAME_CAP (1 << 17)    /* an egress run's frame buffer (NativeSwitch's) */
#define PACKET_IN_MAX 4096     /* PacketIns waiting for Python; more are dropped, counted */
#define EVENTS_MAX 256
#define FROM_CPU UINT64_MAX     /* p4n_rx.seq of an injected frame (PacketOut) */

typedef int (*egress_sent_fn)(p4n_pipeline *p);

typedef struct {
    const p4n_ops *ops;
    p4n_pipeline *p;
    egress_sent_fn sent;
    uint64_t outstanding;      /* its jobs in the queues */
} generation;

/* A queued packet: the C job and the pipeline generation it belongs to. */
typedef struct {
    p4n_job *job;
    int gen;
} item;

typedef struct frame_node {
    struct frame_node *next;
    uint32_t port;
    uint32_t len;
    uint8_t data[];
} frame_node;

typedef struct {
    frame_node *head, *tail;
    uint32_t n;
} frame_queue;

struct p4n_device {
    p4n_clock clock;
    p4n_tm *tm;
    int32_t cpu_port;
    p4n_device_model model;
    p4n_port *ports[P4N_TM_MAX_PORTS];
    uint32_t order[P4N_TM_MAX_PORTS];   /* port numbers ascending (device.py's fd order) */
    uint32_t n_ports;
    p4n_pcap cpu_in, cpu_out;
    generation gens[MAX_GENS];
    int gen;                            /* current generation, -1: no pipeline */
    int next_gen;
    pthread_mutex_t lock;               /* the device lock (Python's Device.lock) */
    pthread_mutex_t qlock;              /* the queues to and from Python, the events */
    int wake_fd;
    int woken;                          /* p4n_device_wake was called: read wake_fd */
    int notify_fd;
    int64_t packet_in_due;              /* emulated us to tell Python of PacketIns; -1: none */
    frame_queue injected;
    frame_queue packet_ins;
    int packet_in_mode;                 /* P4N_PACKET_IN_* */
    p4n_device_event events[EVENTS_MAX];
    uint32_t n_events;
    volatile sig_atomic_t stopping;
    p4n_counters counters;
    p4n_rx_batch batch;
    p4n_handoff out[MAX_HANDOFFS];
    p4n_handoff more[MAX_HANDOFFS];
    uint8_t frame[FRAME_CAP];
    /* _BacklogWatch, in emulated seconds */
    double saturated_since;             /* < 0: not saturated */
    double saturated_s;
    double last_warning;
    double next_drops_check;
};

/* ---- small helpers */

static double now_s(const p4n_device *d)
{
    return (double)(p4n_monotonic_ns() - d->clock.origin_ns) / (d->clock.dilation * 1e9);
}

static void notify(p4n_device *d)
{
    uint64_t one = 1;
    if (write(d->notify_fd, &one, sizeof(one)) < 0) {
        /* counter saturated: Python is due to read anyway */
    }
}

static void report(p4n_device *d, int kind, uint32_t port, int64_t value)
{
    pthread_mutex_lock(&d->qlock);
    if (d->n_events < EVENTS_MAX)
        d->events[d->n_events++] = (p4n_device_event){kind, port, value};
    pthread_mutex_unlock(&d->qlock);
}

static void port_report(void *ctx, const p4n_port *port, int what, int64_t value)
{
    int kind = what == P4N_PORT_SOCKET_ERROR ? P4N_DEV_EV_SOCKET_ERROR
             : what == P4N_PORT_OVERSIZE ? P4N_DEV_EV_OVERSIZE : P4N_DEV_EV_GSO;
    report(ctx, kind, port->number, value);
}

static void push(frame_queue *q, frame_node *n)
{
    n->next = NULL;
    if (q->tail)
        q->tail->next = n;
    else
        q->head = n;
    q->tail = n;
    q->n++;
}

static frame_node *pop(frame_queue *q)
{
    frame_node *n = q->head;
    if (n) {
        q->head = n->next;
        if (!q->head)
            q->tail = NULL;
        q->n--;
    }
    return n;
}

static void free_queue(frame_queue *q)
{
    frame_node *n;
    while ((n = pop(q)))
        free(n);
}

static p4n_port *port_of(p4n_device *d, uint32_t number)
{
    return number < P4N_TM_MAX_PORTS ? d->ports[number] : NULL;
}

static void free_job(p4n_device *d, item *it)
{
    generation *g = &d->gens[it->gen % MAX_GENS];
    g->ops->job_free(g->p, it->job);
    g->outstanding--;
    free(it);
}

/* ---- Device._send and the MAC */

/* Device._send: the bytes put on port's link (0: lost). */
static uint32_t send_frame(p4n_device *d, uint32_t port, const uint8_t *data, uint32_t len)
{
    if (d->cpu_port >= 0 && port == (uint32_t)d->cpu_port) {
        pthread_mutex_lock(&d->qlock);
        int mode = d->packet_in_mode;
        int on = mode == P4N_PACKET_IN_QUEUED && d->packet_ins.n < PACKET_IN_MAX;
        frame_node *n = on ? malloc(sizeof(frame_node) + len) : NULL;
        if (n) {
            n->port = port;
            n->len = len;
            memcpy(n->data, data, len);
            push(&d->packet_ins, n);
        }
        pthread_mutex_unlock(&d->qlock);
        if (n && d->packet_in_due < 0)
            d->packet_in_due = p4n_clock_now_us(&d->clock) +
                               (int64_t)(d->model.packet_in_interval_s * 1e6);
        if (!n && mode != P4N_PACKET_IN_UNHEARD) {
            d->counters.packet_in_dropped++;
            return 0;
        }
        p4n_pcap_record(&d->cpu_out, data, len);
        d->counters.tx++;
        return len;
    }
    p4n_port *p = port_of(d, port);
    if (!p) {
        d->counters.unknown_port++;
        return 0;
    }
    if (!p4n_port_send(p, data, len))
        return 0;
    p4n_pcap_record(&p->cap_out, data, len);
    d->counters.tx++;
    return len;
}

/* Device._send_pause: the traffic manager's PFC frame leaves at once. */
static void send_pause(void *ctx, uint32_t port, uint32_t priority, uint32_t quanta)
{
    p4n_device *d = ctx;
    p4n_port *p = port_of(d, port);
    if (!p)
        return;   /* the CPU port has no peer to pause */
    uint8_t frame[P4N_MIN_FRAME];
    p4n_pfc_frame(p->mac, priority, quanta, frame);
    if (p4n_port_send(p, frame, sizeof(frame)))
        p4n_pcap_record(&p->cap_out, frame, sizeof(frame));
}

/* The watchdog discarded a queued packet. */
static void drop_item(void *ctx, void *it)
{
    free_job(ctx, it);
}

/* Device._enqueue: one hand-off into the traffic manager (in_port -1: the switch's own). */
static void enqueue(p4n_device *d, const p4n_handoff *h, int64_t arrival, int32_t in_port)
{
    item *it = malloc(sizeof(item));
    generation *g = &d->gens[d->gen % MAX_GENS];
    if (!it) {
        g->ops->job_free(g->p, h->job);
        return;
    }
    it->job = h->job;
    it->gen = d->gen;
    g->outstanding++;
    int64_t now = p4n_clock_now_us(&d->clock);
    if (p4n_tm_enqueue(d->tm, now, h->port, h->priority, it, arrival, h->length, in_port) != 1)
        free_job(d, it);
}

/* Device._transmit: egress of a dequeued packet, and its frame out. */
static uint32_t transmit(void *ctx, const p4n_dequeued *dq)
{
    p4n_device *d = ctx;
    item *it = dq->item;
    if (it->gen != d->gen) {
        d->counters.stale_after_reload++;
        free_job(d, it);
        return 0;
    }
    generation *g = &d->gens[it->gen % MAX_GENS];
    p4n_job *job = it->job;
    g->outstanding--;
    free(it);
    p4n_frame frame = {d->frame, FRAME_CAP, 0};
    int64_t now = p4n_clock_now_us(&d->clock);
    uint32_t delta = dq->deq_timedelta < 0 ? 0 : (uint32_t)dq->deq_timedelta;
    int n = g->ops->egress(g->p, job, dq->enq_qdepth, dq->deq_qdepth, (uint64_t)dq->enq_timestamp,
                           delta, (uint64_t)now, &frame, d->more, MAX_HANDOFFS);
    if (n < 0) {
        d->counters.pipeline_errors++;
        report(d, P4N_DEV_EV_EGRESS_ERROR, dq->port, 0);
        return 0;
    }
    int sent = g->sent(g->p);
    /* Egress clones and recirculated packets queue like any other (simple_switch). */
    for (int i = 0; i < n; i++)
        enqueue(d, &d->more[i], now, -1);
    return sent ? send_frame(d, dq->port, frame.data, frame.len) : 0;
}

/* Device._mac_control */
static void mac_control(p4n_device *d, p4n_port *p, const uint8_t *frame, uint32_t len,
                        int64_t arrival)
{
    d->counters.rx++;
    d->counters.mac_control++;
    p4n_pcap_record(&p->cap_in, frame, len);
    uint8_t enabled;
    uint16_t quanta[8];
    if (!p4n_parse_pause(frame, len, &enabled, quanta))
        return;
    int64_t now = p4n_clock_now_us(&d->clock);
    for (uint32_t prio = 0; prio < 8; prio++)
        if (enabled >> prio & 1)
            p4n_tm_receive_pause(d->tm, arrival < now ? arrival : now, p->number, prio, quanta[prio]);
}

/* Device._ingress */
static void ingress(p4n_device *d, uint32_t port, const uint8_t *frame, uint32_t len,
                    int64_t arrival)
{
    d->counters.rx++;
    p4n_port *p = port_of(d, port);
    p4n_pcap_record(p ? &p->cap_in : &d->cpu_in, frame, len);
    if (d->gen < 0) {
        d->counters.no_pipeline++;
        return;
    }
    generation *g = &d->gens[d->gen % MAX_GENS];
    int n = g->ops->ingress(g->p, port, frame, len, (uint64_t)p4n_clock_now_us(&d->clock),
                            d->out, MAX_HANDOFFS);
    if (n < 0) {
        d->counters.pipeline_errors++;
        report(d, P4N_DEV_EV_INGRESS_ERROR, port, len);
        return;
    }
    for (int i = 0; i < n; i++)
        enqueue(d, &d->out[i], arrival, (int32_t)port);
}

static void service(p4n_device *d, int64_t at)
{
    p4n_tm_service(d->tm, at, p4n_clock_now_us(&d->clock), transmit, d);
}

/* ---- creation and configuration */

p4n_device *p4n_device_new(int64_t origin_ns, double dilation, void *tm, int wake_fd,
                           int32_t cpu_port, const p4n_device_model *model)
{
    p4n_device *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->clock = (p4n_clock){origin_ns, dilation};
    d->tm = tm;
    d->cpu_port = cpu_port;
    d->model = *model;
    d->gen = -1;
    d->packet_in_due = -1;
    d->saturated_since = -1;
    d->last_warning = -model->backlog_warn_every_s;
    d->next_drops_check = now_s(d) + model->kernel_drops_check_s;
    p4n_pcap_open(&d->cpu_in, -1);
    p4n_pcap_open(&d->cpu_out, -1);
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->qlock, NULL);
    d->wake_fd = wake_fd;
    d->notify_fd = eventfd(0, EFD_CLOEXEC);
    if (d->notify_fd < 0) {
        p4n_device_free(d);
        return NULL;
    }
    p4n_tm_set_callbacks(d->tm, send_pause, drop_item, d);
    return d;
}

void p4n_device_free(p4n_device *d)
{
    if (!d)
        return;
    void *items[256];
    int n;
    while ((n = p4n_tm_drain(d->tm, items, 256)) > 0)
        for (int i = 0; i < n; i++)
            free_job(d, items[i]);
    p4n_tm_set_callbacks(d->tm, NULL, NULL, NULL);
    for (uint32_t i = 0; i < d->n_ports; i++) {
        p4n_port *p = d->ports[d->order[i]];
        p4n_pcap_close(&p->cap_in);
        p4n_pcap_close(&p->cap_out);
        free(p);
    }
    p4n_pcap_close(&d->cpu_in);
    p4n_pcap_close(&d->cpu_out);
    free_queue(&d->injected);
    free_queue(&d->packet_ins);
    free(d->batch.data);
    free(d->batch.frames);
    if (d->notify_fd >= 0)
        close(d->notify_fd);
    pthread_mutex_destroy(&d->lock);
    pthread_mutex_destroy(&d->qlock);
    free(d);
}

int p4n_device_add_port(p4n_device *d, uint32_t number, int fd, uint8_t *ring,
                        uint32_t block_size, uint32_t blocks, uint32_t frame_size,
                        uint32_t max_frame, const uint8_t *mac)
{
    if (number >= P4N_TM_MAX_PORTS || d->ports[number] || !frame_size || block_size < frame_size)
        return -1;
    p4n_port *p = calloc(1, sizeof(*p));
    if (!p)
        return -1;
    p->number = number;
    p->fd = fd;
    p->ring = ring;
    p->block_size = block_size;
    p->frames_per_block = block_size / frame_size;
    p->n_frames = p->frames_per_block * blocks;
    p->frame_size = frame_size;
    p->max_frame = max_frame;
    memcpy(p->mac, mac, 6);
    p4n_pcap_open(&p->cap_in, -1);
    p4n_pcap_open(&p->cap_out, -1);
    d->ports[number] = p;
    uint32_t i = d->n_ports++;
    while (i > 0 && d->order[i - 1] > number) {
        d->order[i] = d->order[i - 1];
        i--;
    }
    d->order[i] = number;
    return 0;
}

int p4n_device_capture(p4n_device *d, uint32_t port, int in_fd, int out_fd)
{
    p4n_port *p = port_of(d, port);
    p4n_pcap *in = p ? &p->cap_in : &d->cpu_in, *out = p ? &p->cap_out : &d->cpu_out;
    if (!p && (d->cpu_port < 0 || port != (uint32_t)d->cpu_port))
        return -1;
    p4n_pcap_close(in);
    p4n_pcap_close(out);
    return p4n_pcap_open(in, in_fd) | p4n_pcap_open(out, out_fd);
}

int p4n_device_set_pipeline(p4n_device *d, const void *ops, void *pipeline, void *egress_sent)
{
    if (!ops) {
        d->gen = -1;
        return -1;
    }
    generation *g = &d->gens[d->next_gen % MAX_GENS];
    if (g->outstanding)
        return -1;
    g->ops = ops;
    g->p = pipeline;
    g->sent = (egress_sent_fn)egress_sent;
    d->gen = d->next_gen++;
    return d->gen;
}

uint64_t p4n_device_outstanding(p4n_device *d, int gen)
{
    return gen < 0 ? 0 : d->gens[gen % MAX_GENS].outstanding;
}

void p4n_device_lock(p4n_device *d) { pthread_mutex_lock(&d->lock); }
void p4n_device_unlock(p4n_device *d) { pthread_mutex_unlock(&d->lock); }

void p4n_device_wake(p4n_device *d)
{
    uint64_t one = 1;
    __atomic_store_n(&d->woken, 1, __ATOMIC_RELEASE);
    if (write(d->wake_fd, &one, sizeof(one)) < 0) {
        /* counter saturated: the loop is already due to wake */
    }
}

void p4n_device_stop(p4n_device *d)
{
    d->stopping = 1;
    p4n_device_wake(d);
}

int p4n_device_inject(p4n_device *d, uint32_t port, const uint8_t *frame, uint32_t len)
{
    frame_node *n = malloc(sizeof(frame_node) + len);
    if (!n)
        return -1;
    n->port = port;
    n->len = len;
    memcpy(n->data, frame, len);
    pthread_mutex_lock(&d->qlock);
    push(&d->injected, n);
    pthread_mutex_unlock(&d->qlock);
    p4n_device_wake(d);
    return 0;
}

void p4n_device_set_packet_in(p4n_device *d, int mode)
{
    pthread_mutex_lock(&d->qlock);
    d->packet_in_mode = mode;
    pthread_mutex_unlock(&d->qlock);
}

uint32_t p4n_device_packet_in(p4n_device *d, uint8_t *out, uint32_t cap)
{
    pthread_mutex_lock(&d->qlock);
    frame_node *n = d->packet_ins.head;
    uint32_t len = n ? n->len : 0;
    if (n && len <= cap) {
        pop(&d->packet_ins);
        memcpy(out, n->data, len);
        free(n);
    }
    pthread_mutex_unlock(&d->qlock);
    return len;
}

void p4n_device_packet_in_failed(p4n_device *d)
{
    pthread_mutex_lock(&d->lock);
    d->counters.packet_in_dropped++;
    d->counters.tx--;
    pthread_mutex_unlock(&d->lock);
}

int p4n_device_notify_fd(p4n_device *d) { return d->notify_fd; }

int p4n_device_events(p4n_device *d, p4n_device_event *out, int max)
{
    pthread_mutex_lock(&d->qlock);
    int n = (int)d->n_events < max ? (int)d->n_events : max;
    memcpy(out, d->events, sizeof(p4n_device_event) * (size_t)n);
    memmove(d->events, d->events + n, sizeof(p4n_device_event) * (d->n_events - (uint32_t)n));
    d->n_events -= (uint32_t)n;
    pthread_mutex_unlock(&d->qlock);
    return n;
}

/* ---- observation */

p4n_counters p4n_device_counters(p4n_device *d) { return d->counters; }

int p4n_device_port_counters(p4n_device *d, uint32_t port, p4n_port_counters *out)
{
    p4n_port *p = port_of(d, port);
    if (!p)
        return -1;
    *out = (p4n_port_counters){p->tx_errors, p->rx_truncated, p->rx_copied, p->kernel_drops,
                               p->cap_in.write_errors + p->cap_out.write_errors};
    return 0;
}

uint64_t p4n_device_kernel_drops(p4n_device *d)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < d->n_ports; i++) {
        p4n_port *p = d->ports[d->order[i]];
        p4n_port_poll_kernel_drops(p);
        total += p->kernel_drops;
    }
    return total;
}

double p4n_device_saturated_s(p4n_device *d)
{
    double open = d->saturated_since < 0 ? 0.0 : now_s(d) - d->saturated_since;
    return d->saturated_s + open;
}

/* ---- the loop */

double p4n_next_wake_us(int64_t woke_us, double quantum_us)
{
    if (!(quantum_us > 0))
        return (double)woke_us;
    int64_t k = (int64_t)((double)woke_us / quantum_us);   /* truncated: floored below */
    if ((double)k * quantum_us > (double)woke_us)
        k--;
    return (double)(k + 1) * quantum_us;
}

/* _BacklogWatch.update */
static void watch(p4n_device *d, int saturated)
{
    double now = now_s(d);
    if (!saturated) {
        if (d->saturated_since >= 0)
            d->saturated_s += now - d->saturated_since;
        d->saturated_since = -1;
    } else if (d->saturated_since < 0) {
        d->saturated_since = now;
    } else if (now - d->saturated_since > d->model.backlog_warn_after_s &&
               now - d->last_warning > d->model.backlog_warn_every_s) {
        report(d, P4N_DEV_EV_BACKLOG, 0, (int64_t)((now - d->saturated_since) * 1e6));
        d->last_warning = now;
    }
    if (now >= d->next_drops_check) {
        d->next_drops_check = now + d->model.kernel_drops_check_s;
        for (uint32_t i = 0; i < d->n_ports; i++) {
            p4n_port *p = d->ports[d->order[i]];
            uint64_t dropped = p4n_port_poll_kernel_drops(p);
            if (dropped)
                report(d, P4N_DEV_EV_KERNEL_DROPS, p->number, (int64_t)dropped);
        }
    }
}

/* One wake-up's batches: the injected frames (arriving now), then each ready port's;
 * merged in arrival order (device.in_arrival_order: a k-way merge of the batches by
 * arrival, ties to the earlier batch) and put through the switch (Device._handle). */
typedef struct {
    uint32_t first, end;    /* frames of the batch in d->batch */
} span;

static int64_t arrival_of(p4n_device *d, const p4n_rx *rx)
{
    return p4n_clock_us_at(&d->clock, rx->stamp_ns);
}

static void handle(p4n_device *d, const span *spans, int n_spans)
{
    uint32_t pos[P4N_TM_MAX_PORTS + 1];
    for (int i = 0; i < n_spans; i++)
        pos[i] = spans[i].first;
    for (;;) {
        int best = -1;
        int64_t best_at = 0;
        for (int i = 0; i < n_spans; i++) {
            if (pos[i] == spans[i].end)
                continue;
            int64_t at = arrival_of(d, &d->batch.frames[pos[i]]);
            if (best < 0 || at < best_at) {
                best = i;
                best_at = at;
            }
        }
        if (best < 0)
            break;
        const p4n_rx *rx = &d->batch.frames[pos[best]++];
        const uint8_t *frame = d->batch.data + rx->offset;
        service(d, best_at);
        p4n_port *p = port_of(d, rx->port);
        /* PacketOuts are never the MAC's, whatever their EtherType. */
        if (p && rx->seq != FROM_CPU && p4n_is_mac_control(frame, rx->len))
            mac_control(d, p, frame, rx->len, best_at);
        else
            ingress(d, rx->port, frame, rx->len, best_at);
    }
    service(d, p4n_clock_now_us(&d->clock));
}

/* The injected frames, as a batch arriving now. */
static int take_injected(p4n_device *d)
{
    uint64_t count;
    __atomic_store_n(&d->woken, 0, __ATOMIC_RELEASE);
    if (read(d->wake_fd, &count, sizeof(count)) < 0) {
        /* nothing: woken for another reason */
    }
    pthread_mutex_lock(&d->qlock);
    frame_node *list = d->injected.head;
    d->injected = (frame_queue){NULL, NULL, 0};
    pthread_mutex_unlock(&d->qlock);
    int64_t now_ns = p4n_monotonic_ns();
    int rc = 0;
    while (list) {
        frame_node *n = list;
        list = n->next;
        p4n_rx_batch *b = &d->batch;
        uint8_t *to = rc ? NULL : p4n_rx_reserve(b, n->len);
        if (to) {
            memcpy(to, n->data, n->len);
            b->frames[b->n++] = (p4n_rx){n->port, n->len, b->used, now_ns, FROM_CPU};
            b->used += n->len;
        } else {
            rc = -1;
        }
        free(n);
    }
    return rc;
}

/* Before a sleep: when the device next has something due (the traffic manager's next
 * departure or PFC timer, or PacketIns waiting for Python), and the packet time of its
 * fastest paced port (0: none). Returns whether *deadline was set. */
static int plan(p4n_device *d, int64_t *deadline, double *packet_time)
{
    pthread_mutex_lock(&d->lock);
    int has_deadline = p4n_tm_next_deadline(d->tm, p4n_clock_now_us(&d->clock), deadline);
    if (d->packet_in_due >= 0 && (!has_deadline || d->packet_in_due < *deadline)) {
        *deadline = d->packet_in_due;
        has_deadline = 1;
    }
    *packet_time = p4n_tm_packet_time_us(d->tm);
    pthread_mutex_unlock(&d->lock);
    return has_deadline;
}

/* The device's descriptors (fds[0] its wake eventfd, then its ports ascending) marked
 * ready from the rings and the wake flag, without a system call; returns how many. */
static int peek(p4n_device *d, struct pollfd *fds)
{
    int ready = 0;
    fds[0].revents = __atomic_load_n(&d->woken, __ATOMIC_ACQUIRE) ? POLLIN : 0;
    ready += fds[0].revents != 0;
    for (uint32_t i = 0; i < d->n_ports; i++) {
        fds[i + 1].revents = p4n_port_ready(d->ports[d->order[i]]) ? POLLIN : 0;
        ready += fds[i + 1].revents != 0;
    }
    return ready;
}

/* One wake-up's work for the device: the injected frames and the ready ports' batches
 * through the switch, then what is due now; captures flushed; Python told of events
 * and of PacketIns that have waited long enough. */
static void work(p4n_device *d, const struct pollfd *fds)
{
    pthread_mutex_lock(&d->lock);
    d->batch.n = 0;
    d->batch.used = 0;
    span spans[P4N_TM_MAX_PORTS + 1];
    int n_spans = 0, saturated = 0, any_port = 0;
    if (fds[0].revents) {
        spans[n_spans].first = d->batch.n;
        if (take_injected(d) < 0)
            d->counters.pipeline_errors++;   /* no memory: the PacketOuts are lost */
        spans[n_spans++].end = d->batch.n;
    }
    for (uint32_t i = 0; i < d->n_ports; i++) {
        if (!fds[i + 1].revents)
            continue;
        any_port = 1;
        int more = 0;
        spans[n_spans].first = d->batch.n;
        p4n_port_recv(d->ports[d->order[i]], &d->batch, (int)d->model.rx_batch, &more,
                      port_report, d);
        spans[n_spans++].end = d->batch.n;
        saturated |= more;
    }
    handle(d, spans, n_spans);
    for (uint32_t i = 0; i < d->n_ports; i++) {
        p4n_port *p = d->ports[d->order[i]];
        p4n_pcap_flush(&p->cap_in);
        p4n_pcap_flush(&p->cap_out);
    }
    p4n_pcap_flush(&d->cpu_in);
    p4n_pcap_flush(&d->cpu_out);
    if (any_port)
        watch(d, saturated);
    if (p4n_tm_pending_events(d->tm))
        report(d, P4N_DEV_EV_TM, 0, 0);
    pthread_mutex_unlock(&d->lock);
    /* PacketIns go to Python together, a wake-up of its relay thread per
     * packet_in_interval_s rather than per PacketIn (docs/native-engine.md);
     * packet_in_due is the loop thread's alone. */
    int64_t now = p4n_clock_now_us(&d->clock);
    pthread_mutex_lock(&d->qlock);
    int packet_ins = d->packet_ins.n &&
        (now >= d->packet_in_due || d->packet_ins.n >= PACKET_IN_MAX / 2);
    int tell = d->n_events || packet_ins;
    pthread_mutex_unlock(&d->qlock);
    if (packet_ins)
        d->packet_in_due = -1;
    if (tell)
        notify(d);
}

/* A device that stopped: its kernel drops read a last time, Python told. */
static void finish(p4n_device *d)
{
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < d->n_ports; i++)
        p4n_port_poll_kernel_drops(d->ports[d->order[i]]);
    pthread_mutex_unlock(&d->lock);
    notify(d);
}

int p4n_device_run(p4n_device *d)
{
    return p4n_devices_run(&d, 1, NULL);
}

int p4n_devices_run(p4n_device **devs, int n, const int *regroup)
{
    /* Named, so that top -H and a benchmark's per-thread counts tell it from Python's. */
    pthread_setname_np(pthread_self(), "p4n-loop");
    if (n <= 0)
        return 0;
    /* Each device's descriptors side by side: its wake eventfd, then its ports. A
     * stopped device's are negative, which ppoll skips. */
    int *first = malloc(sizeof(int) * (size_t)n);
    uint8_t *done = calloc((size_t)n, 1);
    nfds_t nfds = 0;
    for (int k = 0; k < n; k++)
        nfds += devs[k]->n_ports + 1;
    struct pollfd *fds = malloc(sizeof(struct pollfd) * nfds);
    if (!first || !done || !fds) {
        free(first);
        free(done);
        free(fds);
        errno = ENOMEM;
        return -1;
    }
    nfds = 0;
    for (int k = 0; k < n; k++) {
        p4n_device *d = devs[k];
        first[k] = (int)nfds;
        fds[nfds++] = (struct pollfd){d->wake_fd, POLLIN, 0};
        for (uint32_t i = 0; i < d->n_ports; i++)
            fds[nfds++] = (struct pollfd){d->ports[d->order[i]]->fd, POLLIN, 0};
    }
    p4n_clock clock = devs[0]->clock;   /* a fabric's devices share the emulation clock */
    int64_t woke = 0;
    int rc = 0, running = n;
    while (running) {
        int64_t deadline = 0;
        int has_deadline = 0;
        double quantum = 0.0;
        for (int k = 0; k < n; k++) {
            p4n_device *d = devs[k];
            if (done[k])
                continue;
            if (d->stopping) {
                done[k] = 1;
                running--;
                for (uint32_t i = 0; i <= d->n_ports; i++)
                    fds[first[k] + (int)i].fd = -1;
                finish(d);
                continue;
            }
            int64_t due;
            double packet_time;
            if (plan(d, &due, &packet_time) && (!has_deadline || due < deadline)) {
                deadline = due;
                has_deadline = 1;
            }
            double q = d->model.wake_quantum_packet_times * packet_time;
            if (q > 0 && (!(quantum > 0) || q < quantum))
                quantum = q;
        }
        if (!running || (regroup && __atomic_load_n(regroup, __ATOMIC_ACQUIRE)))
            break;
        if (quantum > 0) {
            /* At most one wake-up per quantum (device.py's WAKE_QUANTUM_PACKET_TIMES), on
             * the emulated clock's grid of quanta (p4n_next_wake_us), for every device. */
            int64_t until = p4n_clock_monotonic_at_us(&clock, p4n_next_wake_us(woke, quantum));
            struct timespec ts = {until / 1000000000, until % 1000000000};
            while (until > p4n_monotonic_ns() &&
                   clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
            }
        }
        /* The rings and the wake flags first: after the quantum a frame has mostly come,
         * and then the loop goes on without ppoll's system call. */
        int ready = 0;
        for (int k = 0; k < n; k++)
            if (!done[k])
                ready += peek(devs[k], &fds[first[k]]);
        int64_t left = has_deadline ? deadline - p4n_clock_now_us(&clock) : 1;
        if (!ready && left > 0) {
            struct timespec timeout, *tp = NULL;
            if (has_deadline) {
                int64_t ns = (int64_t)((double)left * clock.dilation * 1e3);
                timeout = (struct timespec){ns / 1000000000, ns % 1000000000};
                tp = &timeout;
            }
            ready = ppoll(fds, nfds, tp, NULL);
            if (ready < 0 && errno != EINTR) {
                rc = -1;
                break;
            }
            if (ready <= 0)
                for (nfds_t i = 0; i < nfds; i++)
                    fds[i].revents = 0;
        }
        woke = p4n_clock_now_us(&clock);
        for (int k = 0; k < n; k++)
            if (!done[k])
                work(devs[k], &fds[first[k]]);
    }
    for (int k = 0; k < n && rc < 0; k++)
        if (!done[k])
            finish(devs[k]);
    free(first);
    free(done);
    free(fds);
    return rc;
}
