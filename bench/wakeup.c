/* The wake-up probe of bench_wakeup.py: how late a thread that sleeps to absolute
 * deadlines wakes, as the switches' and NICs' loops sleep to their next departure.
 *
 *   wakeup SECONDS PERIOD_US   ->  "count p50 p99 p999 max" (ns) on stdout
 *
 * It runs at whatever scheduling its caller gave it (bench_wakeup runs it under
 * `chrt -r 10`, the switches' priority). After a wake-up later than a whole period the
 * next deadline starts from now, so one stall counts once, not once per missed period. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long ns_of(struct timespec t) { return (long long)t.tv_sec * 1000000000LL + t.tv_nsec; }

static int cmp(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: wakeup SECONDS PERIOD_US\n");
        return 2;
    }
    double seconds = atof(argv[1]);
    long long period = (long long)(atof(argv[2]) * 1000.0);
    if (!(seconds > 0) || period <= 0) {
        fprintf(stderr, "wakeup: SECONDS and PERIOD_US must be > 0\n");
        return 2;
    }
    size_t n = (size_t)(seconds * 1e9 / (double)period);
    if (n == 0)
        n = 1;
    long long *late = malloc(n * sizeof *late);
    if (late == NULL) {
        fprintf(stderr, "wakeup: out of memory\n");
        return 1;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long deadline = ns_of(now);
    for (size_t i = 0; i < n; i++) {
        deadline += period;
        struct timespec at = {.tv_sec = deadline / 1000000000LL, .tv_nsec = deadline % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) != 0)
            ;
        clock_gettime(CLOCK_MONOTONIC, &now);
        late[i] = ns_of(now) - deadline;
        if (late[i] > period)
            deadline = ns_of(now);
    }
    qsort(late, n, sizeof *late, cmp);
    printf("%zu %lld %lld %lld %lld\n", n, late[n / 2], late[n * 99 / 100], late[n * 999 / 1000], late[n - 1]);
    free(late);
    return 0;
}
