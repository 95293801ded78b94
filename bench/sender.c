/* bench_switch's sender: frames from a file sent on an AF_PACKET socket with sendmmsg,
 * paced to a rate, so that the sender is not what limits a native switch (a Python
 * sender's send() per frame stops near 250 kpps on this machine).
 *
 *   sender IFACE FRAMES_FILE COUNT RATE     (RATE frames/s; 0 = as fast as it can)
 *
 * FRAMES_FILE holds frames as <u16 little-endian length><bytes>..., sent round robin.
 * Prints "<frames sent> <seconds>" on stdout; exits 1 with a message on any error.
 * The sender sleeps between batches of BATCH frames (clock_nanosleep to the batch's
 * due time), so that on a paced trial it does not take a core from the switch. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH 32
#define MAX_FRAMES 1024
#define MAX_LEN 9216

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void sleep_until(double when) {
    struct timespec t = {.tv_sec = (time_t)when, .tv_nsec = (long)((when - (time_t)when) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL)) {}
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: sender IFACE FRAMES_FILE COUNT RATE\n");
        return 1;
    }
    long count = atol(argv[3]);
    double rate = atof(argv[4]);
    static uint8_t frames[MAX_FRAMES][MAX_LEN];
    static size_t lens[MAX_FRAMES];
    int n = 0;
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 1; }
    uint8_t hdr[2];
    while (fread(hdr, 1, 2, f) == 2) {
        size_t len = hdr[0] | (size_t)hdr[1] << 8;
        if (n == MAX_FRAMES || len > MAX_LEN || fread(frames[n], 1, len, f) != len) {
            fprintf(stderr, "%s: frame %d: too many, too long or cut short\n", argv[2], n);
            return 1;
        }
        lens[n++] = len;
    }
    fclose(f);
    if (n == 0 || count <= 0) { fprintf(stderr, "nothing to send\n"); return 1; }

    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (fd < 0) { perror("socket"); return 1; }
    struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
                               .sll_ifindex = (int)if_nametoindex(argv[1])};
    if (!addr.sll_ifindex || bind(fd, (struct sockaddr *)&addr, sizeof addr)) {
        perror(argv[1]);
        return 1;
    }
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    long sent = 0;
    double start = now_s();
    while (sent < count) {
        int k = count - sent < BATCH ? (int)(count - sent) : BATCH;
        for (int i = 0; i < k; i++) {
            int j = (int)((sent + i) % n);
            iov[i] = (struct iovec){.iov_base = frames[j], .iov_len = lens[j]};
            memset(&msgs[i], 0, sizeof msgs[i]);
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int done = sendmmsg(fd, msgs, (unsigned)k, 0);
        if (done < 0) {
            /* the veth's queue is full: the frames are the switch's loss, not ours */
            sleep_until(now_s() + 20e-6);
            continue;
        }
        sent += done;
        if (rate > 0)
            sleep_until(start + sent / rate);
    }
    printf("%ld %.9f\n", sent, now_s() - start);
    return 0;
}
