/* The traffic manager in C: p4sim/switch/traffic_manager.py (with pfc.py's per-port PFC
 * state and emulation/fidelity.py's lateness histogram), the same decisions on the same
 * numbers. Per port and priority a FIFO drained at the port's rate on the ideal link's
 * schedule; PFC (XOFF/XON from per-ingress-port accounting, headroom, PAUSE in and out,
 * the watchdog); every departure's lateness against the schedule.
 *
 * Nothing here reads a clock: every call that needs the time is given `now`, emulated
 * microseconds (emulation/clock.py), as the Python one reads its `clock()`. Times are
 * int64_t where Python has ints and double where it has floats, so the arithmetic is
 * the same IEEE double arithmetic in the same order, and the results are equal, not
 * close. What Python logs, this one records as events (p4n_tm_events) for its caller
 * to say in the same words.
 *
 * The text between the cdef markers is what cffi reads (p4sim/switch/native/tm.py):
 * plain declarations, #define of integer constants only. */
#ifndef P4SIM_NATIVE_TM_H
#define P4SIM_NATIVE_TM_H

#include <stdint.h>

/* cdef begin */
#define P4N_PRIORITIES 8            /* pause.PRIORITIES: priorities a PFC frame speaks for */
#define P4N_TM_MAX_PORTS 512        /* v1model's egress_spec is 9 bits */
#define P4N_TM_BAD_PORT -2          /* a port number >= P4N_TM_MAX_PORTS */
#define P4N_TM_NO_MEMORY -3

/* What the caller logs (traffic_manager.py's messages). */
#define P4N_TM_EV_BAD_PRIORITY 1    /* port, priority: first out-of-range priority on port */
#define P4N_TM_EV_PAUSE_NO_RATE 2   /* port: PAUSE received, the port has no byte rate */
#define P4N_TM_EV_STORM 3           /* port, priority, count dropped, value: paused for (us) */
#define P4N_TM_EV_STORM_OVER 4      /* port, priority: lossless again */

typedef struct p4n_tm p4n_tm;
typedef struct p4n_fifo p4n_fifo;

typedef struct {
    int kind;
    uint32_t port;
    uint32_t priority;
    uint32_t count;
    double value;
} p4n_tm_event;

/* A packet leaving its queue with the queueing metadata for the egress pipeline
 * (traffic_manager.Dequeued). */
typedef struct {
    uint32_t port;
    uint32_t priority;
    void *item;
    int64_t enq_timestamp;
    uint32_t enq_qdepth;
    uint32_t deq_qdepth;
    int64_t deq_timedelta;
} p4n_dequeued;

/* Runs the egress side of a dequeued packet and sends; returns the bytes put on the
 * port's link (0: nothing left). May enqueue (egress clones) into the same manager. */
typedef uint32_t (*p4n_transmit_fn)(void *ctx, const p4n_dequeued *d);
/* The MAC sends a PFC frame asking `quanta` for `priority` out of `port` at once. */
typedef void (*p4n_pause_fn)(void *ctx, uint32_t port, uint32_t priority, uint32_t quanta);
/* An item the manager discarded after admitting it (the PFC watchdog empties a queue). */
typedef void (*p4n_drop_fn)(void *ctx, void *item);

/* pfc.PortPfc: PFC state and counters of one port, per priority. */
typedef struct {
    int64_t ingress_bytes[8];
    uint8_t xoff[8];
    double refresh_at[8];
    uint64_t pause_tx[8];
    uint64_t headroom_drops;
    uint64_t pause_rx[8];
    double paused_until[8];
    double paused_since[8];
    double booked_us[8];
    double last_pause_rx[8];
    uint8_t storm[8];
    uint64_t storms;
    uint64_t storm_drops;
} p4n_port_pfc;

/* traffic_manager._Port: queues, schedule and counters of one egress port. A rate of 0
 * is Python's None (no limit). Read-only for callers. */
typedef struct {
    p4n_fifo *queues;             /* one per priority */
    uint32_t queued;
    uint32_t depth;
    double byte_rate;
    double pkt_rate;
    uint64_t drops;
    uint64_t enqueued;
    uint64_t sent_packets;
    uint64_t sent_bytes;
    uint32_t max_qdepth;
    uint32_t frame_bytes;
    double packet_time;
    double free_at;
    int64_t last_departure;
    double last_serialisation;
    uint64_t *lateness;           /* fidelity.LatenessHistogram: counts per bucket */
    double lateness_max;
    uint64_t bursts;
    uint8_t bad_priority_reported;
    uint8_t no_rate_pause_reported;
    uint8_t busy;
    p4n_port_pfc pfc;
} p4n_tm_port;

/* The model's constants, handed in by the Python modules that own them (so that one
 * fact has one owner): traffic_manager.py's, pause.py's and fidelity.BOUNDS, the
 * lateness buckets' upper bounds, ascending (one more bucket for overflow). */
typedef struct {
    double catchup_us;
    double burst_gap;
    double xoff_refresh;
    uint32_t min_frame;
    uint32_t quantum_bits;
    uint32_t max_quanta;
    const double *bounds;
    uint32_t n_bounds;
} p4n_tm_model;

/* priorities 1..P4N_PRIORITIES, depth >= 1, queue_rate_pps 0 for none; NULL if
 * priorities is out of range or without memory. */
p4n_tm *p4n_tm_new(uint32_t priorities, uint32_t depth, double queue_rate_pps,
                   const p4n_tm_model *model);
/* Frees the manager; queued items are the caller's (p4n_tm_drain first). */
void p4n_tm_free(p4n_tm *tm);
void p4n_tm_set_callbacks(p4n_tm *tm, p4n_pause_fn send_pause, p4n_drop_fn drop, void *ctx);

/* Configuration. Each returns 0, or P4N_TM_BAD_PORT / P4N_TM_NO_MEMORY. port -1 in
 * set_queue_rate / set_queue_depth: every port and the default for new ones. */
int p4n_tm_add_port(p4n_tm *tm, uint32_t port);
int p4n_tm_set_port_rate(p4n_tm *tm, uint32_t port, double bytes_per_s);
int p4n_tm_set_frame_bytes(p4n_tm *tm, uint32_t port, uint32_t frame_bytes);
int p4n_tm_set_queue_rate(p4n_tm *tm, int32_t port, double pps);
int p4n_tm_set_queue_depth(p4n_tm *tm, int32_t port, uint32_t packets);
/* enabled 0: no PFC; else priorities (bit p: lossless) must have queues. */
int p4n_tm_set_pfc(p4n_tm *tm, int64_t now, int enabled, uint32_t priorities, int64_t xoff,
                   int64_t xon, int64_t headroom, double watchdog_us);

/* Data path. enqueue returns 1 admitted, 0 dropped, <0 an error above; in_port -1: a
 * packet the switch made (no PFC accounting); arrival: the kernel's receive time (now
 * when there is none). */
int p4n_tm_enqueue(p4n_tm *tm, int64_t now, uint32_t port, uint32_t priority, void *item,
                   int64_t arrival, uint32_t size, int32_t in_port);
/* Serves every port busy at the call whose link was free by at (at most now): the
 * departures due before an arrival yet to be enqueued (TrafficManager.service's until).
 * They leave now: their metadata, PFC releases and lateness are now's. */
void p4n_tm_service(p4n_tm *tm, int64_t at, int64_t now, p4n_transmit_fn transmit, void *ctx);
/* 1 and *deadline set when some queued packet or PFC timer falls due, else 0. */
int p4n_tm_next_deadline(p4n_tm *tm, int64_t now, int64_t *deadline);
int p4n_tm_receive_pause(p4n_tm *tm, int64_t now, uint32_t port, uint32_t priority,
                         uint32_t quanta);
/* Takes every queued item out (for the caller to free), up to max; returns how many. */
int p4n_tm_drain(p4n_tm *tm, void **items, int max);

/* Observation. */
const p4n_tm_port *p4n_tm_port_get(const p4n_tm *tm, uint32_t port);  /* NULL: no such port */
uint32_t p4n_tm_queue_len(const p4n_tm *tm, uint32_t port, uint32_t priority);
int p4n_tm_ports(const p4n_tm *tm, uint32_t *out, int max);  /* ascending */
uint32_t p4n_tm_lateness_buckets(const p4n_tm *tm);
uint64_t p4n_tm_backlog(const p4n_tm *tm);
double p4n_tm_packet_time_us(const p4n_tm *tm);               /* 0: no port has a rate */
int p4n_tm_events(p4n_tm *tm, p4n_tm_event *out, int max);    /* takes them */
uint32_t p4n_tm_pending_events(const p4n_tm *tm);
/* cdef end */

#endif
