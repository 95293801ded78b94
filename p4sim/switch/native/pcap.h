/* Per-port captures (p4sim/switch/pcap.py): records appended to a pcap file that
 * pcap.PcapWriter opened and gave its global header; buffered, and flushed by the loop
 * after each wake-up's work, as the Python device flushes. */
#ifndef P4SIM_NATIVE_PCAP_H
#define P4SIM_NATIVE_PCAP_H

#include <stdint.h>

#define P4N_PCAP_SNAPLEN 65535
#define P4N_PCAP_BUFFER (1 << 18)

typedef struct {
    int fd;          /* -1: no capture */
    uint32_t used;
    uint8_t *buf;
    uint64_t write_errors;
} p4n_pcap;

int p4n_pcap_open(p4n_pcap *w, int fd);   /* takes fd (-1: none); 0, or -1 without memory */
/* PcapWriter.write with the time now (CLOCK_REALTIME, microseconds). */
void p4n_pcap_record(p4n_pcap *w, const uint8_t *frame, uint32_t len);
void p4n_pcap_flush(p4n_pcap *w);
void p4n_pcap_close(p4n_pcap *w);

#endif
