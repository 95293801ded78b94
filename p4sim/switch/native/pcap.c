/* pcap.py's records in C: little-endian (sec, usec, caplen, len), then the frame. */
#include "pcap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int p4n_pcap_open(p4n_pcap *w, int fd)
{
    w->fd = fd;
    w->used = 0;
    w->write_errors = 0;
    w->buf = NULL;
    if (fd < 0)
        return 0;
    w->buf = malloc(P4N_PCAP_BUFFER);
    return w->buf ? 0 : -1;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

void p4n_pcap_record(p4n_pcap *w, const uint8_t *frame, uint32_t len)
{
    if (w->fd < 0)
        return;
    uint32_t caplen = len < P4N_PCAP_SNAPLEN ? len : P4N_PCAP_SNAPLEN;
    if (w->used + 16 + caplen > P4N_PCAP_BUFFER)
        p4n_pcap_flush(w);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint8_t *at = w->buf + w->used;
    put32(at, (uint32_t)ts.tv_sec);
    put32(at + 4, (uint32_t)(ts.tv_nsec / 1000));
    put32(at + 8, caplen);
    put32(at + 12, len);
    memcpy(at + 16, frame, caplen);
    w->used += 16 + caplen;
}

void p4n_pcap_flush(p4n_pcap *w)
{
    uint32_t done = 0;
    while (done < w->used) {
        ssize_t n = write(w->fd, w->buf + done, w->used - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            w->write_errors++;
            break;
        }
        done += (uint32_t)n;
    }
    w->used = 0;
}

void p4n_pcap_close(p4n_pcap *w)
{
    if (w->fd >= 0) {
        p4n_pcap_flush(w);
        close(w->fd);
    }
    free(w->buf);
    w->fd = -1;
    w->buf = NULL;
}
