/* pause.py's frames in C. */
#include "pause.h"

#include <string.h>

#define ETHERTYPE_AT 12
#define OPCODE_AT 14
#define BODY_AT 16
#define OPCODE_PAUSE 0x0001
#define OPCODE_PFC 0x0101

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

int p4n_is_mac_control(const uint8_t *frame, uint32_t len)
{
    return len >= 14 && frame[ETHERTYPE_AT] == 0x88 && frame[ETHERTYPE_AT + 1] == 0x08;
}

int p4n_parse_pause(const uint8_t *frame, uint32_t len, uint8_t *enabled, uint16_t *quanta)
{
    if (!p4n_is_mac_control(frame, len) || len < BODY_AT + 2)
        return 0;
    uint16_t opcode = be16(frame + OPCODE_AT);
    if (opcode == OPCODE_PAUSE) {
        uint16_t q = be16(frame + BODY_AT);
        *enabled = 0xFF;
        for (int p = 0; p < 8; p++)
            quanta[p] = q;
        return 1;
    }
    if (opcode == OPCODE_PFC && len >= BODY_AT + 2 + 16) {
        *enabled = (uint8_t)be16(frame + BODY_AT);
        for (int p = 0; p < 8; p++)
            quanta[p] = be16(frame + BODY_AT + 2 + 2 * p);
        return 1;
    }
    return 0;
}

void p4n_pfc_frame(const uint8_t *src_mac, uint32_t priority, uint32_t quanta, uint8_t *out)
{
    static const uint8_t dst[6] = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01};
    memset(out, 0, P4N_MIN_FRAME);
    memcpy(out, dst, 6);
    memcpy(out + 6, src_mac, 6);
    out[12] = 0x88;
    out[13] = 0x08;
    out[14] = OPCODE_PFC >> 8;
    out[15] = OPCODE_PFC & 0xFF;
    out[17] = (uint8_t)(1u << priority);   /* class-enable vector, big-endian */
    out[18 + 2 * priority] = (uint8_t)(quanta >> 8);
    out[19 + 2 * priority] = (uint8_t)quanta;
}
