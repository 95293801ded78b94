/* ports.py's per-frame work in C (ports.h). */
#define _GNU_SOURCE
#include "ports.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8
#define ETH_P_IPV4 0x0800
#define ETH_P_IPV6 0x86DD
/* sockaddr_ll.sll_pkttype: after the tpacket2_hdr, aligned to TPACKET_ALIGNMENT. */
#define SLL_AT TPACKET_ALIGN(sizeof(struct tpacket2_hdr))
#define PKTTYPE_AT (SLL_AT + offsetof(struct sockaddr_ll, sll_pkttype))

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

void p4n_complete_l4_checksum(uint8_t *frame, uint32_t len)
{
    uint32_t at = 12;
    if (len < at + 2)
        return;
    uint16_t ethertype = be16(frame + at);
    while (ethertype == ETH_P_8021Q || ethertype == ETH_P_8021AD) {
        at += 4;
        if (len < at + 2)
            return;
        ethertype = be16(frame + at);
    }
    uint32_t l3 = at + 2, l4, end;
    uint8_t proto;
    if (ethertype == ETH_P_IPV4 && len >= l3 + 20) {
        l4 = l3 + (frame[l3] & 0xF) * 4u;
        proto = frame[l3 + 9];
        end = l3 + be16(frame + l3 + 2);
    } else if (ethertype == ETH_P_IPV6 && len >= l3 + 40) {
        l4 = l3 + 40;
        proto = frame[l3 + 6];
        end = l4 + be16(frame + l3 + 4);
    } else {
        return;
    }
    uint32_t field = proto == 6 ? 16 : proto == 17 ? 6 : 0;
    if (!field || !(l4 + field + 2 <= end && end <= len))
        return;
    uint64_t total = 0;
    uint32_t i = l4;
    for (; i + 1 < end; i += 2) {
        uint16_t word;
        memcpy(&word, frame + i, 2);   /* native order: swapped back below */
        total += word;
    }
    if (i < end) {                     /* odd length: padded with a zero byte */
        uint8_t last[2] = {frame[i], 0};
        uint16_t word;
        memcpy(&word, last, 2);
        total += word;
    }
    while (total >> 16)
        total = (total & 0xFFFF) + (total >> 16);
    uint16_t checksum = (uint16_t)~total;
    if (proto == 17 && checksum == 0)
        checksum = 0xFFFF;             /* UDP: 0 means "no checksum" */
    memcpy(frame + l4 + field, &checksum, 2);
}

uint8_t *p4n_rx_reserve(p4n_rx_batch *b, uint32_t len)
{
    if (b->used + len > b->cap) {
        uint64_t cap = b->cap ? b->cap : 1 << 20;
        while (b->used + len > cap)
            cap *= 2;
        uint8_t *data = realloc(b->data, cap);
        if (!data)
            return NULL;
        b->data = data;
        b->cap = cap;
    }
    if (b->n == b->max) {
        uint32_t max = b->max ? b->max * 2 : 256;
        p4n_rx *frames = realloc(b->frames, sizeof(p4n_rx) * max);
        if (!frames)
            return NULL;
        b->frames = frames;
        b->max = max;
    }
    return b->data + b->used;
}

/* InterfacePort._as_on_wire for a frame already in the arena at *rx (room for a tag). */
static void as_on_wire(p4n_port *port, p4n_rx_batch *b, p4n_rx *rx, uint32_t status,
                       uint16_t tci, uint16_t tpid, p4n_port_report_fn report, void *ctx)
{
    uint8_t *frame = b->data + rx->offset;
    if (status & TP_STATUS_VLAN_VALID && rx->len >= 12) {
        uint16_t type = status & TP_STATUS_VLAN_TPID_VALID ? tpid : ETH_P_8021Q;
        memmove(frame + 16, frame + 12, rx->len - 12);
        frame[12] = (uint8_t)(type >> 8);
        frame[13] = (uint8_t)type;
        frame[14] = (uint8_t)(tci >> 8);
        frame[15] = (uint8_t)tci;
        rx->len += 4;
    }
    if (status & TP_STATUS_CSUMNOTREADY) {
        if (rx->len > port->max_frame && !port->gso_reported) {
            port->gso_reported = 1;
            report(ctx, port, P4N_PORT_GSO, rx->len);
        }
        p4n_complete_l4_checksum(frame, rx->len);
    }
}

/* InterfacePort._recv_whole: a frame too big for a slot, from the socket's queue. */
static int recv_whole(p4n_port *port, p4n_rx_batch *b, p4n_rx *rx,
                      p4n_port_report_fn report, void *ctx)
{
    uint8_t *at = p4n_rx_reserve(b, P4N_MAX_FRAME + 4);
    if (!at)
        return -1;
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
    } control;
    struct iovec iov = {at, P4N_MAX_FRAME};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof(control.buf)};
    ssize_t n = recvmsg(port->fd, &msg, MSG_TRUNC | MSG_DONTWAIT);
    if (n < 0)
        return 0;   /* the copy was not queued (socket buffer full): lost */
    if (n > P4N_MAX_FRAME || msg.msg_flags & MSG_TRUNC) {
        port->rx_truncated++;
        report(ctx, port, P4N_PORT_OVERSIZE, n);
        return 0;
    }
    rx->len = (uint32_t)n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA &&
                c->cmsg_len >= CMSG_LEN(sizeof(struct tpacket_auxdata))) {
            struct tpacket_auxdata aux;
            memcpy(&aux, CMSG_DATA(c), sizeof(aux));
            as_on_wire(port, b, rx, aux.tp_status, aux.tp_vlan_tci, aux.tp_vlan_tpid, report, ctx);
        }
    }
    return 1;
}

static void check_error(p4n_port *port, p4n_port_report_fn report, void *ctx)
{
    int err = 0;
    socklen_t size = sizeof(err);
    if (getsockopt(port->fd, SOL_SOCKET, SO_ERROR, &err, &size) == 0 && err)
        report(ctx, port, P4N_PORT_SOCKET_ERROR, err);
}

/* The ring slot the kernel fills next. */
static uint8_t *next_slot(const p4n_port *port)
{
    uint32_t slot = port->next;
    return port->ring + (uint64_t)(slot / port->frames_per_block) * port->block_size +
           (uint64_t)(slot % port->frames_per_block) * port->frame_size;
}

int p4n_port_ready(const p4n_port *port)
{
    const struct tpacket2_hdr *h = (const struct tpacket2_hdr *)next_slot(port);
    return (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) != 0;
}

int p4n_port_recv(p4n_port *port, p4n_rx_batch *batch, int limit, int *more,
                  p4n_port_report_fn report, void *ctx)
{
    struct timespec real, mono;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    int64_t realtime_ahead = ((int64_t)real.tv_sec - mono.tv_sec) * 1000000000 +
                             (real.tv_nsec - mono.tv_nsec);
    int n = 0;
    while (n < limit) {
        uint32_t slot = port->next;
        uint8_t *at = next_slot(port);
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)at;
        uint32_t status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
        if (!(status & TP_STATUS_USER)) {
            if (!n)
                check_error(port, report, ctx);
            break;
        }
        p4n_rx rx = {port->number, 0, batch->used,
                     (int64_t)h->tp_sec * 1000000000 + h->tp_nsec - realtime_ahead, 0};
        int keep = 0;
        if (status & TP_STATUS_COPY) {
            port->rx_copied++;
            keep = recv_whole(port, batch, &rx, report, ctx);
        } else if (at[PKTTYPE_AT] == PACKET_OUTGOING) {
            keep = 0;
        } else if (h->tp_snaplen < h->tp_len ||
                   (uint64_t)h->tp_mac + h->tp_snaplen > port->frame_size) {
            port->rx_truncated++;
            report(ctx, port, P4N_PORT_OVERSIZE, h->tp_len);
        } else {
            uint8_t *to = p4n_rx_reserve(batch, h->tp_snaplen + 4);
            if (to) {
                memcpy(to, at + h->tp_mac, h->tp_snaplen);
                rx.len = h->tp_snaplen;
                as_on_wire(port, batch, &rx, status, h->tp_vlan_tci, h->tp_vlan_tpid, report, ctx);
                keep = 1;
            } else {
                keep = -1;
            }
        }
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);  /* hand it back */
        port->next = (slot + 1) % port->n_frames;
        if (keep < 0)
            return -1;
        if (keep) {
            rx.seq = batch->n;
            batch->frames[batch->n++] = rx;
            batch->used += rx.len;
            n++;
        }
    }
    *more = n == limit;
    return n;
}

int p4n_port_send(p4n_port *port, const uint8_t *frame, uint32_t len)
{
    for (;;) {
        if (send(port->fd, frame, len, MSG_DONTWAIT) >= 0)
            return 1;
        if (errno != EINTR)
            break;
    }
    /* ports.py's TX_LOSS_ERRNOS and anything else alike: the frame is lost, counted. */
    port->tx_errors++;
    return 0;
}

uint64_t p4n_port_poll_kernel_drops(p4n_port *port)
{
    struct tpacket_stats stats;
    socklen_t size = sizeof(stats);
    if (getsockopt(port->fd, SOL_PACKET, PACKET_STATISTICS, &stats, &size))
        return 0;
    port->kernel_drops += stats.tp_drops;
    return stats.tp_drops;
}
