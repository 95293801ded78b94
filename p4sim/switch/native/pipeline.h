/* The contract between a pipeline generated in C from BMv2 JSON (p4sim/switch/ccodegen/)
 * and the native device loop (p4sim/switch/native/): V1Switch.run_ingress and
 * V1Switch.run_egress (p4sim/switch/v1model.py), in C. The two sides are compiled into
 * separate shared objects, so the loop reaches a pipeline through the table of functions
 * that the generated code's p4n_get_ops() returns; times are the fabric's emulated
 * microseconds (emulation/clock.py), passed in so the pipeline reads no clock itself. */
#ifndef P4SIM_NATIVE_PIPELINE_H
#define P4SIM_NATIVE_PIPELINE_H

#include <stdint.h>

typedef struct p4n_pipeline p4n_pipeline;  /* one loaded program: tables, externs, digests */
typedef struct p4n_job p4n_job;            /* one egress copy: its PHV and packet registers */

/* A packet handed from ingress (or an egress clone/recirculation) to an egress queue:
 * Python's EgressJob. */
typedef struct {
    p4n_job *job;
    uint32_t port;      /* egress port */
    uint32_t priority;  /* standard_metadata.priority at the hand-off, 0 without it */
    uint32_t length;    /* bytes on the wire if egress leaves the packet unchanged */
} p4n_handoff;

/* The frame an egress run sends, always on the job's port; the caller owns the buffer. */
typedef struct {
    uint8_t *data;
    uint32_t cap;       /* bytes available at data */
    uint32_t len;       /* bytes written; 0: nothing to send (dropped) */
} p4n_frame;

typedef struct {
    /* Parser, checksum verification, ingress, ingress clones, digests, resubmit and
     * multicast for one frame received on in_port at now_us. Writes up to max hand-offs
     * to out and returns their number; -1 on a pipeline error (the frame is lost). */
    int (*ingress)(p4n_pipeline *p, uint32_t in_port, const uint8_t *frame, uint32_t len,
                   uint64_t now_us, p4n_handoff *out, int max);
    /* Egress of a dequeued job with its queueing metadata; always consumes the job.
     * Fills frame (len 0 when nothing leaves) and writes up to max new hand-offs (egress
     * clones, the copies a recirculated packet makes) to more; returns their number, or
     * -1 on a pipeline error. */
    int (*egress)(p4n_pipeline *p, p4n_job *job, uint32_t enq_qdepth, uint32_t deq_qdepth,
                  uint64_t enq_timestamp, uint32_t deq_timedelta, uint64_t now_us,
                  p4n_frame *frame, p4n_handoff *more, int max);
    /* A job that never reaches egress (tail drop, queued across a pipeline reload). */
    void (*job_free)(p4n_pipeline *p, p4n_job *job);
} p4n_ops;

/* Exported by every generated pipeline library. */
const p4n_ops *p4n_get_ops(void);

#endif
