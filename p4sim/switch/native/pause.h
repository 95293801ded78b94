/* PAUSE frames (p4sim/switch/pause.py): recognising and reading the MAC control frames a
 * port receives, and making the PFC frames the traffic manager asks for. pause.py owns
 * the layout; the constants here are its, and tests/test_native_loop.py compares the
 * two on the same frames. Every read is bounds-checked against the frame's length. */
#ifndef P4SIM_NATIVE_PAUSE_H
#define P4SIM_NATIVE_PAUSE_H

#include <stdint.h>

/* cdef begin */
#define P4N_MIN_FRAME 60

/* pause.is_mac_control */
int p4n_is_mac_control(const uint8_t *frame, uint32_t len);
/* pause.parse_pause: 1 and, per priority p with bit p of *enabled set, quanta[p];
 * 0 for another opcode or a frame cut short. */
int p4n_parse_pause(const uint8_t *frame, uint32_t len, uint8_t *enabled, uint16_t *quanta);
/* pause.pfc_frame for one priority: writes P4N_MIN_FRAME bytes to out. */
void p4n_pfc_frame(const uint8_t *src_mac, uint32_t priority, uint32_t quanta, uint8_t *out);
/* cdef end */

#endif
