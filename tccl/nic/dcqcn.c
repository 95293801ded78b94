/* DCQCN reaction point (Zhu et al., SIGCOMM 2015, section 3): tccl/dcqcn.py's
 * DcqcnRate step for step. Python's float `//` is not C's floor(a / b) at every
 * boundary, so py_floordiv computes it as CPython does: the same events fire at the
 * same emulated instants in both engines. */
#include <math.h>

#include "nic.h"

static double py_floordiv(double vx, double wx)
{
    double mod = fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod) {
        if ((wx < 0) != (mod < 0))
            div -= 1.0;
    }
    if (div) {
        double floordiv = floor(div);
        if (div - floordiv > 0.5)
            floordiv += 1.0;
        return floordiv;
    }
    return copysign(0.0, vx / wx);
}

void nic_dcqcn_init(nic_dcqcn *r, const nic_dcqcn_params *p, double now)
{
    r->p = *p;
    r->rc = r->rt = p->line_rate;
    r->alpha = p->initial_alpha;
    r->timer_count = r->byte_count = 0;
    r->bytes = 0.0;
    r->next_alpha = now + p->alpha_timer;
    r->next_timer = now + p->rate_timer;
    r->cnps = 0;
}

/* The stage comes from the counters before this event counts itself (callers count
 * after): F events of fast recovery after a cut, as DcqcnRate._increase. */
static void increase(nic_dcqcn *r)
{
    const nic_dcqcn_params *p = &r->p;
    int64_t t = r->timer_count, bc = r->byte_count;
    int64_t hi = t > bc ? t : bc, lo = t < bc ? t : bc;
    if (hi < p->fast_recovery_steps) {
        /* fast recovery: target unchanged */
    } else if (lo > p->fast_recovery_steps) {
        r->rt += (double)(lo - p->fast_recovery_steps) * p->rate_hai;
    } else {
        r->rt += p->rate_ai;
    }
    if (p->line_rate < r->rt)
        r->rt = p->line_rate;
    double rc = (r->rt + r->rc) / 2;
    r->rc = p->line_rate < rc ? p->line_rate : rc;
}

void nic_dcqcn_advance(nic_dcqcn *r, double now)
{
    const nic_dcqcn_params *p = &r->p;
    if (now >= r->next_alpha) {
        int64_t n = (int64_t)py_floordiv(now - r->next_alpha, p->alpha_timer) + 1;
        r->alpha *= pow(1 - p->g, (double)n);
        r->next_alpha += (double)n * p->alpha_timer;
    }
    while (now >= r->next_timer) {
        r->next_timer += p->rate_timer;
        increase(r);
        r->timer_count += 1;
        if (r->rc >= p->line_rate) {    /* nothing left to recover: skip idle expiries */
            int64_t n = now >= r->next_timer ? (int64_t)py_floordiv(now - r->next_timer, p->rate_timer) + 1 : 0;
            r->timer_count += n;
            r->next_timer += (double)n * p->rate_timer;
        }
    }
}

void nic_dcqcn_on_cnp(nic_dcqcn *r, double now)
{
    nic_dcqcn_advance(r, now);
    const nic_dcqcn_params *p = &r->p;
    r->cnps += 1;
    r->rt = r->rc;
    double cut = r->rc * (1 - r->alpha / 2);
    r->rc = cut > p->min_rate ? cut : p->min_rate;
    r->alpha = (1 - p->g) * r->alpha + p->g;
    r->timer_count = r->byte_count = 0;
    r->bytes = 0.0;
    r->next_alpha = now + p->alpha_timer;
    r->next_timer = now + p->rate_timer;
}

void nic_dcqcn_on_sent(nic_dcqcn *r, int64_t nbytes, double now)
{
    nic_dcqcn_advance(r, now);
    r->bytes += (double)nbytes;
    while (r->bytes >= r->p.byte_counter) {
        r->bytes -= r->p.byte_counter;
        increase(r);
        r->byte_count += 1;
    }
}
