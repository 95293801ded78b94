/* The native RoCE NIC: the transport of tccl/qp.py + dcqcn.py + engine.py's NIC part
 * in C, behind a small verbs-like API (post a message, poll completions).
 *
 * The frame layout is not restated here: layout.h is generated at build time from
 * topo/headers.py (through tccl/roce.py), its one owner (tccl/nic/build.py).
 * Every reader of a frame or a request checks its bounds; nothing here trusts a length
 * it did not compute itself. Time is emulated seconds (double), given by the caller or
 * computed from a CLOCK_MONOTONIC stamp with the fabric clock's origin and dilation,
 * with the same arithmetic as emulation/clock.py. */
#ifndef NIC_H
#define NIC_H

#ifndef NIC_CDEF /* the cffi declarations are this file without the system headers */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#endif

#include "layout.h"

/* ---- CRC-32 (crc32.c) -------------------------------------------------------- */

uint32_t nic_crc32(uint32_t crc, const uint8_t *buf, size_t len);  /* zlib.crc32 */
/* The same by tables alone: what nic_crc32 does on a CPU without carry-less multiply. */
uint32_t nic_crc32_tables(uint32_t crc, const uint8_t *buf, size_t len);

/* ---- frames (frames.c) ------------------------------------------------------- */

/* The headers of one direction of one QP (Ethernet/IPv4/UDP/BTH as Scapy built them
 * in roce.FrameTemplate): per frame the lengths, the IPv4 checksum, opcode, PSN and
 * the ICRC are patched. */
typedef struct {
    uint8_t hdr[NIC_HDR_LEN];
} nic_template;

enum { NIC_F_ACKREQ = 1, NIC_F_BECN = 2 };

/* Builds one frame into out (capacity cap); returns its length, 0 if it does not fit. */
size_t nic_frame(const nic_template *t, uint8_t opcode, uint32_t psn, int flags,
                 const uint8_t *ext, size_t ext_len, const uint8_t *payload, size_t plen,
                 uint8_t *out, size_t cap);
size_t nic_ack(const nic_template *t, uint32_t psn, uint32_t msn, int nak, uint8_t *out, size_t cap);
size_t nic_cnp(const nic_template *t, uint8_t *out, size_t cap);
uint32_t nic_icrc(const uint8_t *frame, size_t len);
int nic_icrc_ok(const uint8_t *frame, size_t len);

typedef struct {
    uint8_t ecn, opcode, ackreq, syndrome;
    uint16_t sport;
    uint32_t dqpn, psn, msn;
    uint32_t payload_off, payload_end;
} nic_parsed;

/* roce.parse: 1 and *p filled for IPv4/UDP:4791 with a BTH, else 0. */
int nic_parse(const uint8_t *frame, size_t len, nic_parsed *p);
int32_t nic_psn_diff(uint32_t a, uint32_t b);

/* ---- completions (cq.c) -------------------------------------------------------- */

enum { NIC_CQ_SEND = 1, NIC_CQ_RECV = 2, NIC_CQ_PORT = 3 };

typedef struct {
    int kind;
    uint64_t user;      /* the QP's owner tag, given at creation */
    uint64_t wr_id;     /* NIC_CQ_SEND: the posted message's */
    uint8_t *data;      /* NIC_CQ_RECV: the message (owned by the queue until cleared) */
    size_t len;
} nic_completion;

/* What the library's thread and a device's NIC thread share (device.c): the lock over
 * the device's state, the eventfds that wake either side. Opaque to the library. */
typedef struct nic_sync nic_sync;

typedef struct {
    nic_completion *e;
    size_t n, cap;
    int oom;            /* a completion could not be stored: the caller raises */
    nic_sync *sync;     /* a device's queue: its lock guards every QP posting here */
} nic_cq;

void nic_cq_push(nic_cq *cq, int kind, uint64_t user, uint64_t wr_id, uint8_t *data, size_t len);
void nic_cq_clear(nic_cq *cq);
void nic_cq_free(nic_cq *cq);
/* Moves every completion (and the oom flag) of cq into `into`, a queue of the
 * library's own, which it then reads and clears without the device's lock. */
void nic_cq_drain(nic_cq *cq, nic_cq *into);
/* Copies len bytes of state of cq's device (statistics, histograms) under its lock:
 * a consistent snapshot while the NIC thread runs. */
void nic_cq_read(nic_cq *cq, void *dst, const void *src, size_t len);

/* ---- DCQCN reaction point (dcqcn.c) -------------------------------------------- */

typedef struct {
    double line_rate, g, cnp_interval, alpha_timer, rate_timer, byte_counter;
    int64_t fast_recovery_steps;
    double rate_ai, rate_hai, min_rate, initial_alpha;
} nic_dcqcn_params;

typedef struct {
    nic_dcqcn_params p;
    double rc, rt, alpha;
    int64_t timer_count, byte_count;
    double bytes, next_alpha, next_timer;
    int64_t cnps;
} nic_dcqcn;

void nic_dcqcn_init(nic_dcqcn *r, const nic_dcqcn_params *p, double now);
void nic_dcqcn_on_cnp(nic_dcqcn *r, double now);
void nic_dcqcn_on_sent(nic_dcqcn *r, int64_t nbytes, double now);
void nic_dcqcn_advance(nic_dcqcn *r, double now);

/* ---- queue pairs (requester.c, responder.c) ------------------------------------ */

typedef struct nic_msg {
    struct nic_msg *next;
    uint8_t *data;
    uint32_t len, offset;
    uint64_t wr_id;
} nic_msg;

typedef struct {
    uint32_t psn;
    uint8_t opcode;
    nic_msg *msg;
    uint32_t start, end;
} nic_seg;

typedef struct {
    int64_t packets, bytes, retransmits, naks, timeouts, cnps, messages_done, acked_bytes;
} nic_req_stats;

typedef struct {
    uint32_t qpn;
    nic_template tmpl;
    uint32_t mtu, window;
    double rto;
    nic_dcqcn rate;
    nic_req_stats stats;
    nic_msg *q_head, *q_tail;
    nic_seg *inflight;          /* ring of `window` slots: PSNs una .. una+if_len-1 */
    uint32_t if_head, if_len, resend;
    uint32_t una, nxt, since_ack_req;
    double next_tx, last_progress, unblocked_at;
    int port_change;            /* a change to `pending` waits for a boundary */
    nic_template pending;
    nic_cq *cq;
    uint64_t user;
} nic_requester;

nic_requester *nic_requester_new(uint32_t qpn, const uint8_t *hdr, size_t hdr_len,
                                 const nic_dcqcn_params *p, double now, uint32_t mtu,
                                 uint32_t window, double rto, nic_cq *cq, uint64_t user);
void nic_requester_free(nic_requester *r);
/* The library's calls (post, idle, sport, request_port, advance_rate) take the
 * device's lock when the QP's queue has one; the NIC thread's do not (it holds it). */
/* 0, or -1: empty or too long a message, or no memory. */
int nic_requester_post(nic_requester *r, const uint8_t *data, size_t len, uint64_t wr_id,
                       int has_now, double now);
int nic_requester_has_work(const nic_requester *r);
int nic_requester_idle(const nic_requester *r);
uint16_t nic_requester_sport(const nic_requester *r);
/* Schedules a change of the headers (a new source port) for the next message boundary
 * with nothing in flight; 0, or -1 for a bad header length. */
int nic_requester_request_port(nic_requester *r, const uint8_t *hdr, size_t hdr_len);
/* nic_dcqcn_advance on the requester's rate (the timeline's sample). */
void nic_requester_advance_rate(nic_requester *r, double now);
/* The next frame if the pacer allows it at now: its length (0: none), into out. */
size_t nic_requester_next_frame(nic_requester *r, double now, uint8_t *out, size_t cap);
void nic_requester_on_ack(nic_requester *r, uint32_t psn, int nak, double now);
void nic_requester_on_cnp(nic_requester *r, double now);
/* 1 and *at: when the RTO fires next (0: nothing in flight). */
int nic_requester_check_timeout(nic_requester *r, double now, double *at);
/* 1 and *at: when the next packet may leave / became sendable (0: nothing to send). */
int nic_requester_ready_at(const nic_requester *r, double *at);
int nic_requester_sendable_at(const nic_requester *r, double *at);
size_t nic_requester_frame_cap(const nic_requester *r);

typedef struct {
    int64_t packets, bytes, out_of_order, duplicates, bad_icrc, ce_marked, cnps_sent;
    double min_cnp_gap;
    int64_t messages;
} nic_resp_stats;

typedef struct {
    uint32_t qpn;
    nic_template tmpl, cnp_tmpl;
    double cnp_interval;
    uint32_t epsn, msn;
    nic_resp_stats stats;
    uint8_t *parts;
    size_t parts_len, parts_cap;
    int nak_sent;
    double last_cnp;
    uint16_t last_sport;
    nic_cq *cq;
    uint64_t user;
} nic_responder;

/* Up to two frames a received data frame is answered with (CNP, ACK/NAK). */
#define NIC_SMALL_FRAME 128
typedef struct {
    int n;
    size_t len[2];
    uint8_t frame[2][NIC_SMALL_FRAME];
} nic_reply;

nic_responder *nic_responder_new(uint32_t qpn, const uint8_t *hdr, size_t hdr_len,
                                 const uint8_t *cnp_hdr, size_t cnp_hdr_len, double cnp_interval,
                                 nic_cq *cq, uint64_t user);
void nic_responder_free(nic_responder *r);
/* Handles one data frame already parsed into *p; the answers go to *out. */
void nic_responder_on_frame(nic_responder *r, const uint8_t *frame, size_t len,
                            const nic_parsed *p, double now, nic_reply *out);

/* ---- lateness histograms (histogram.c) ------------------------------------------ */

/* emulation.fidelity.LatenessHistogram + tccl.fidelity.Lateness: counts by lateness
 * in frame times over NIC_HIST_BOUNDS (layout.h), the max, and the early ones. */
typedef struct {
    int64_t counts[NIC_HIST_BUCKETS];
    double max;
    int64_t early;
    double per_unit, early_s;
} nic_lateness;

void nic_lateness_init(nic_lateness *h, double unit_s);
void nic_lateness_add(nic_lateness *h, double late_s);

/* ---- one agent's NICs (device.c) ------------------------------------------------ */

/* A PACKET_RX_RING (TPACKET_V2) mapped by the Python port: `frames` slots of
 * `frame_size` bytes, `block_size / frame_size` of them per block, in `len` bytes. */
typedef struct {
    uint8_t *base;
    size_t len;
    uint32_t block_size, frame_size, frames, next;
} nic_ring;

typedef struct {
    size_t len;
    uint8_t frame[NIC_SMALL_FRAME];
} nic_held;

typedef struct {
    int fd;                     /* the IPv4 socket: sends every frame */
    int pause_fd;               /* the MAC control socket (PAUSE frames) */
    nic_ring data, pause;
    uint8_t ip[4];
    double line_rate;
    int priority;               /* of the QPs' data and ACKs */
    nic_requester **reqs;
    size_t n_reqs, cap_reqs, rr;
    double next_tx, free_at;
    double paused_until[NIC_PRIORITIES];
    int64_t pause_rx;
    double paused_s;
    nic_held *held;             /* answers waiting out a pause: held[head .. head+n) */
    size_t held_head, n_held, cap_held;
    nic_lateness tx_lateness, rx_lateness;
    int64_t tx_errors;
    int tx_errno;
} nic_port;

typedef struct {
    uint64_t key;
    int used;
    nic_requester *req;
    nic_responder *resp;
} nic_qp;

static const uint32_t NIC_NO_QPN = 0xFFFFFFFFu;

typedef struct {
    nic_port *ports;
    size_t n_ports;
    nic_qp *qps;
    size_t n_qps, qp_cap;
    nic_cq cq;
    int64_t origin_ns;
    double dilation, frame_time, catchup_frames;
    int max_rx_batch, max_tx_batch;
    int64_t rx_frames, rx_ignored, tx_frames;
    uint32_t need_port, need_qpn;   /* where a receive stopped: a QP it does not know */
    double rx_now;
    double woke;                /* emulated time of the last wake-up */
    int64_t wakeups;
    uint8_t *txbuf;
    size_t txcap;
    nic_sync *sync;
} nic_device;

nic_device *nic_device_new(int64_t origin_ns, double dilation, double frame_time, int max_rx_batch,
                           int max_tx_batch, double catchup_frames);
void nic_device_free(nic_device *d);
/* The port's index, or -1 (a ring that does not add up, no memory, the thread runs). */
int nic_device_add_port(nic_device *d, int fd, int pause_fd, nic_ring data, nic_ring pause,
                        const uint8_t *ip, double line_rate, int priority);
/* The library's: under the device's lock, and kick the thread. */
int nic_device_add_qp(nic_device *d, uint32_t port, uint32_t qpn, nic_requester *req, nic_responder *resp);
int nic_device_skip(nic_device *d);
/* The NIC thread's steps (without a thread: a test's, on one thread), lock not taken.
 * Handles waiting frames in arrival order; returns how many. need_qpn != NIC_NO_QPN:
 * it stopped at a frame for that QP of port need_port, which add_qp or skip settles. */
int nic_device_receive(nic_device *d, double now);
/* Sends what the pacers allow at now, runs the RTOs; 1 and *due: when next. */
int nic_device_service(nic_device *d, double now, double *due);

/* The NICs' own loop on a thread of its own, as an RNIC runs beside its driver:
 * receive, send, run the RTOs, then sleep until the next departure, timeout, frame or
 * kick (a post, a new QP, a skip) -- whatever the library's thread is doing. A wake-up
 * comes at least `quantum` (emulated s) after the one before, except for a kick
 * (engine.py's WAKE_QUANTUM_FRAMES). The thread holds the device's lock except while it
 * sleeps; it keeps the caller's real-time priority, and the caller's thread goes one
 * below it. 0, or -1 (already running, too many ports, no thread). */
int nic_device_start(nic_device *d, double quantum);
/* Stops and joins the thread (nothing if none runs); nic_device_free does it too. */
void nic_device_stop(nic_device *d);
/* The eventfd that becomes readable when the library has something to do:
 * completions, a frame for a QP it does not know (nic_device_need), or a failure
 * (nic_device_error). Reading it and draining the queue re-arms it. */
int nic_device_notify_fd(const nic_device *d);
/* The QPN a receive stopped at (its port in *port), or NIC_NO_QPN. */
uint32_t nic_device_need(nic_device *d, uint32_t *port);
/* The errno that stopped the thread (its wait on the sockets failed), or 0. */
int nic_device_error(nic_device *d);

#endif
