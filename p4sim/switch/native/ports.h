/* A port's frames in and out (p4sim/switch/ports.py's InterfacePort, per frame): the
 * PACKET_RX_RING (TPACKET_V2) that ports.py set up and mapped is read here, frames with
 * their kernel arrival times, put back as they were on the wire (the VLAN tag the kernel
 * stripped, the L4 checksum left to offload); transmit is a non-blocking send on the
 * port's socket. Setting the socket up stays in ports.py: one owner of the ring's
 * geometry and the socket options. Every access to a slot or a frame is checked against
 * the slot's and the frame's bounds. */
#ifndef P4SIM_NATIVE_PORTS_H
#define P4SIM_NATIVE_PORTS_H

#include <stdint.h>

#include "pcap.h"

#define P4N_MAX_FRAME 65536

typedef struct {
    uint32_t number;
    int fd;
    uint8_t *ring;
    uint32_t block_size;
    uint32_t frames_per_block;
    uint32_t n_frames;
    uint32_t frame_size;
    uint32_t next;            /* slot the kernel fills next */
    uint32_t max_frame;       /* MTU + Ethernet header + one tag */
    uint8_t mac[6];
    uint8_t gso_reported;
    uint64_t tx_errors;
    uint64_t rx_truncated;
    uint64_t rx_copied;
    uint64_t kernel_drops;
    p4n_pcap cap_in;
    p4n_pcap cap_out;
} p4n_port;

/* What a port reports for the caller to log (ports.py's messages). */
enum { P4N_PORT_OK, P4N_PORT_SOCKET_ERROR, P4N_PORT_OVERSIZE, P4N_PORT_GSO };
typedef void (*p4n_port_report_fn)(void *ctx, const p4n_port *port, int what, int64_t value);

/* One received frame: its bytes (on the wire) and arrival (CLOCK_MONOTONIC ns). */
typedef struct {
    uint32_t port;
    uint32_t len;
    uint64_t offset;          /* into the caller's arena */
    int64_t stamp_ns;
    uint64_t seq;             /* order read, to keep equal stamps in order */
} p4n_rx;

typedef struct {
    uint8_t *data;
    uint64_t used, cap;
    p4n_rx *frames;
    uint32_t n, max;
} p4n_rx_batch;

/* Room for len more bytes in the batch's arena and one more frame: where they go
 * (at data + used), or NULL without memory. */
uint8_t *p4n_rx_reserve(p4n_rx_batch *b, uint32_t len);
/* Takes up to limit frames from the port's ring into batch; returns how many, or -1
 * without memory; *more: the limit was hit. */
int p4n_port_recv(p4n_port *port, p4n_rx_batch *batch, int limit, int *more,
                  p4n_port_report_fn report, void *ctx);
/* Whether the kernel has filled the port's next slot: a frame waits in the ring. Read
 * without a system call, so the loop asks the rings before it asks ppoll. */
int p4n_port_ready(const p4n_port *port);
/* 1 if sent, 0 if the kernel refused it (counted in tx_errors). */
int p4n_port_send(p4n_port *port, const uint8_t *frame, uint32_t len);
/* Frames the kernel dropped since the last call (added to kernel_drops). */
uint64_t p4n_port_poll_kernel_drops(p4n_port *port);
/* cdef begin */
/* ports.complete_l4_checksum, in place; frame has room for len bytes. */
void p4n_complete_l4_checksum(uint8_t *frame, uint32_t len);
/* cdef end */

#endif
