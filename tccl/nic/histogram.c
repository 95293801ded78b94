/* Lateness of departures and of received frames' handling, in frame times: the
 * buckets of emulation.fidelity.LatenessHistogram (NIC_HIST_BOUNDS, generated from
 * it) and tccl.fidelity.Lateness's early count, so the report merges with the
 * Python engine's and the switches'. */
#include "nic.h"

static const double bounds[NIC_HIST_BUCKETS - 1] = {NIC_HIST_BOUNDS};

void nic_lateness_init(nic_lateness *h, double unit_s)
{
    for (int i = 0; i < NIC_HIST_BUCKETS; i++)
        h->counts[i] = 0;
    h->max = 0.0;
    h->early = 0;
    h->per_unit = 1.0 / unit_s;
    h->early_s = -NIC_EARLY_FRAMES * unit_s;
}

void nic_lateness_add(nic_lateness *h, double late_s)
{
    if (late_s < h->early_s)
        h->early += 1;
    double x = late_s * h->per_unit;
    if (x > h->max)
        h->max = x;
    /* bisect_left: the first bound >= x */
    int lo = 0, hi = NIC_HIST_BUCKETS - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (bounds[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    h->counts[lo] += 1;
}
