/* Per-port PFC state (p4sim/switch/pfc.py's PortPfc): what a PAUSE received does to a
 * priority's pause window and its paused-time account. The decisions (XOFF/XON, the
 * watchdog) are the traffic manager's (tm.c), as in traffic_manager.py. */
#ifndef P4SIM_NATIVE_PFC_H
#define P4SIM_NATIVE_PFC_H

#include "tm.h"

/* PortPfc.paused: the priority's queue is paused at now. */
int p4n_pfc_paused(const p4n_port_pfc *s, uint32_t priority, double now);
/* PortPfc.pause: a PAUSE (until > now) or a resume (until = now) arrived at now. */
void p4n_pfc_pause(p4n_port_pfc *s, uint32_t priority, double now, double until);

#endif
