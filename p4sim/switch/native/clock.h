/* The emulation clock (emulation/clock.py) in C: emulated time is CLOCK_MONOTONIC since
 * the fabric's origin, divided by the dilation. The Python side hands origin and
 * dilation over (EmulationClock's fields, from ASTRAL_CLOCK or --clock), so both
 * engines read the same instant the same way. */
#ifndef P4SIM_NATIVE_CLOCK_H
#define P4SIM_NATIVE_CLOCK_H

#include <stdint.h>

typedef struct {
    int64_t origin_ns;
    double dilation;
} p4n_clock;

int64_t p4n_monotonic_ns(void);
/* EmulationClock.us_at_monotonic_ns: int((ns - origin) / (dilation * 1e3)). */
int64_t p4n_clock_us_at(const p4n_clock *c, int64_t monotonic_ns);
/* EmulationClock.now_us */
int64_t p4n_clock_now_us(const p4n_clock *c);
/* The monotonic time at which emulated time reaches us (for absolute waits). */
int64_t p4n_clock_monotonic_at_us(const p4n_clock *c, double us);

#endif
