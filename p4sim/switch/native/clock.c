/* emulation/clock.py's reading of emulated time, in the same double arithmetic. */
#include "clock.h"

#include <time.h>

int64_t p4n_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t p4n_clock_us_at(const p4n_clock *c, int64_t monotonic_ns)
{
    return (int64_t)((double)(monotonic_ns - c->origin_ns) / (c->dilation * 1e3));
}

int64_t p4n_clock_now_us(const p4n_clock *c)
{
    return p4n_clock_us_at(c, p4n_monotonic_ns());
}

int64_t p4n_clock_monotonic_at_us(const p4n_clock *c, double us)
{
    return c->origin_ns + (int64_t)(us * c->dilation * 1e3);
}
