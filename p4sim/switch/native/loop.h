/* The native device loop: p4sim/switch/device.py's Device.run in C, one thread that
 * touches every packet. Each wake-up reads a batch from every ready port's ring, merges
 * them by kernel arrival time, and puts each frame through the switch at its arrival
 * time (issue 29: the departures due by then leave first; a MAC control frame pauses
 * the queues from then, any other frame runs the generated pipeline's ingress and is
 * enqueued), then serves what is due now: egress, transmit, captures. Waits are ppoll
 * with nanosecond timeouts, at most one wake-up in each of device.py's quanta on the
 * emulated clock's grid (p4n_next_wake_us).
 *
 * Python (p4sim/switch/native/device.py) sets it up -- sockets and rings from ports.py,
 * capture files from pcap.py, the traffic manager of tm.py, the pipeline of
 * NativeSwitch -- and then only crosses in through p4n_device_lock (QueueControl, the
 * P4Runtime writes, stats), the PacketOut queue, and out through the notify eventfd
 * (PacketIns and what to log). The loop never calls into Python. */
#ifndef P4SIM_NATIVE_LOOP_H
#define P4SIM_NATIVE_LOOP_H

#include <stdint.h>

/* cdef begin */
typedef struct p4n_device p4n_device;

/* device.py's counters, the same names. */
typedef struct {
    uint64_t rx;
    uint64_t tx;
    uint64_t no_pipeline;
    uint64_t pipeline_errors;
    uint64_t stale_after_reload;
    uint64_t unknown_port;
    uint64_t packet_in_dropped;
    uint64_t mac_control;
} p4n_counters;

typedef struct {
    uint64_t tx_errors;
    uint64_t rx_truncated;
    uint64_t rx_copied;
    uint64_t kernel_drops;
    uint64_t capture_errors;
} p4n_port_counters;

/* What the loop reports for Python to log (device.py's and ports.py's messages). */
#define P4N_DEV_EV_SOCKET_ERROR 1     /* port, value: errno */
#define P4N_DEV_EV_OVERSIZE 2         /* port, value: frame length */
#define P4N_DEV_EV_GSO 3              /* port, value: frame length */
#define P4N_DEV_EV_INGRESS_ERROR 4    /* port, value: frame length */
#define P4N_DEV_EV_EGRESS_ERROR 5     /* port */
#define P4N_DEV_EV_BACKLOG 6          /* value: us the input has been saturated */
#define P4N_DEV_EV_KERNEL_DROPS 7     /* port, value: frames */
#define P4N_DEV_EV_TM 8               /* the traffic manager has events (p4n_tm_events) */

typedef struct {
    int kind;
    uint32_t port;
    int64_t value;
} p4n_device_event;

/* The model's constants, from device.py (their owner). */
typedef struct {
    double wake_quantum_packet_times;
    uint32_t rx_batch;
    double backlog_warn_after_s;
    double backlog_warn_every_s;
    double kernel_drops_check_s;
    double packet_in_interval_s;   /* a PacketIn waits at most this for the ones after it */
} p4n_device_model;

/* tm: a p4n_tm * (tm.h) the device now drives (its callbacks become the device's);
 * wake_fd: the eventfd that wakes the loop (device.py's, Python's to close). */
p4n_device *p4n_device_new(int64_t origin_ns, double dilation, void *tm, int wake_fd,
                           int32_t cpu_port, const p4n_device_model *model);
/* Closes the notify eventfd and the captures, frees queued jobs with their pipelines'
 * job_free; the ports' sockets and rings and the wake eventfd stay Python's. */
void p4n_device_free(p4n_device *d);
/* A port whose socket (fd) and TPACKET_V2 ring (mapped at ring) ports.py set up. */
int p4n_device_add_port(p4n_device *d, uint32_t number, int fd, uint8_t *ring,
                        uint32_t block_size, uint32_t blocks, uint32_t frame_size,
                        uint32_t max_frame, const uint8_t *mac);
/* Capture files (pcap.PcapWriter wrote their headers) the device takes over; -1: none. */
int p4n_device_capture(p4n_device *d, uint32_t port, int in_fd, int out_fd);
/* Installs a pipeline: ops and pipeline as pipeline.h, egress_sent the generated
 * library's p4n_egress_sent (whether egress sent a frame, even an empty one); NULL ops:
 * no pipeline. Returns the generation, or -1 when too many older ones still have jobs
 * queued. Call with the device locked. */
int p4n_device_set_pipeline(p4n_device *d, const void *ops, void *pipeline,
                            void *egress_sent);
/* Jobs of generation gen still queued (its pipeline must live until 0). */
uint64_t p4n_device_outstanding(p4n_device *d, int gen);

void p4n_device_lock(p4n_device *d);
void p4n_device_unlock(p4n_device *d);

/* PacketOut: a frame into ingress as if received on port now; -1 without memory. */
int p4n_device_inject(p4n_device *d, uint32_t port, const uint8_t *frame, uint32_t len);
/* What becomes of PacketIns: P4N_PACKET_IN_OFF (no handler: dropped, counted),
 * P4N_PACKET_IN_QUEUED (for the handler, through p4n_device_packet_in), or
 * P4N_PACKET_IN_UNHEARD (the handler has no controller to send them to: counted sent
 * and captured as the handler's drop would be, without waking Python). */
#define P4N_PACKET_IN_OFF 0
#define P4N_PACKET_IN_QUEUED 1
#define P4N_PACKET_IN_UNHEARD 2
void p4n_device_set_packet_in(p4n_device *d, int mode);
/* The next PacketIn into out: its length (0: none waiting; > cap: left, call again). */
uint32_t p4n_device_packet_in(p4n_device *d, uint8_t *out, uint32_t cap);
/* A PacketIn the handler failed on: counted as dropped, not sent. */
void p4n_device_packet_in_failed(p4n_device *d);
/* Readable (an eventfd) when events wait, when PacketIns have waited
 * packet_in_interval_s (or fill half the queue), or the loop stopped. */
int p4n_device_notify_fd(p4n_device *d);
int p4n_device_events(p4n_device *d, p4n_device_event *out, int max);

/* When a loop that woke at woke_us (emulated) sleeps to: the first multiple of the
 * quantum after it. Every switch of a fabric shares the clock's origin and, on links of
 * one rate, the quantum, so their sleeps end together and the kernel serves them with
 * one timer interrupt: a SCHED_RR thread gets no timer slack that would merge them
 * otherwise (docs/native-engine.md). quantum_us <= 0: woke_us. */
double p4n_next_wake_us(int64_t woke_us, double quantum_us);
/* Runs until p4n_device_stop; returns 0, or -1 when ppoll failed (errno). */
int p4n_device_run(p4n_device *d);
/* One loop thread for n devices of one emulation clock (`p4sim switches`): one sleep
 * to the grid of the smallest quantum, one ppoll over every device's descriptors, then
 * each device's work under its own lock, in order. A device stopped by p4n_device_stop
 * is left out from then on (its rings no longer read, Python told as by
 * p4n_device_run's end); returns when every device has stopped, or -- regroup not NULL
 * -- once *regroup is set (after a p4n_device_wake: the devices stopped by then are
 * told, the others keep running when called again, in a new set): 0, or -1 when ppoll
 * failed (errno). */
int p4n_devices_run(p4n_device **devs, int n, const int *regroup);
void p4n_device_stop(p4n_device *d);
void p4n_device_wake(p4n_device *d);

/* Observation (device locked). */
p4n_counters p4n_device_counters(p4n_device *d);
int p4n_device_port_counters(p4n_device *d, uint32_t port, p4n_port_counters *out);
/* Polls every port's kernel drops now; returns their total so far. */
uint64_t p4n_device_kernel_drops(p4n_device *d);
/* Emulated seconds with the input saturated (the open period included). */
double p4n_device_saturated_s(p4n_device *d);
/* cdef end */

#endif
