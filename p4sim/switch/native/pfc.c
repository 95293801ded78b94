/* PortPfc's methods (p4sim/switch/pfc.py), in the same double arithmetic. */
#include "pfc.h"

int p4n_pfc_paused(const p4n_port_pfc *s, uint32_t priority, double now)
{
    return s->paused_until[priority] > now;
}

void p4n_pfc_pause(p4n_port_pfc *s, uint32_t priority, double now, double until)
{
    double prev = s->paused_until[priority];
    if (prev > now)
        s->booked_us[priority] -= prev - now;   /* the part of the old pause not lived */
    else
        s->paused_since[priority] = now;
    s->booked_us[priority] += until - now > 0.0 ? until - now : 0.0;
    s->paused_until[priority] = until;
}
