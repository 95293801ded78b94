/* CRC-32 as zlib computes it (the ICRC's, frames.c): a received 4 KiB frame is checked
 * and every sent one computed, so it is a sixth of a NIC's CPU per frame at table
 * speed. Where the CPU multiplies carry-less (x86-64's PCLMULQDQ), whole 16-byte blocks
 * are folded four at a time -- the method of Intel's "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ" (2009), with its published constants for this
 * polynomial -- and the tail goes through the tables; both give zlib's CRC (tests:
 * tests/test_nic_differential.py). */
#include "nic.h"

static uint32_t crc_table[8][256];
static int crc_ready;

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            crc_table[t][n] = crc_table[0][crc_table[t - 1][n] & 0xFF] ^ (crc_table[t - 1][n] >> 8);
    crc_ready = 1;
}

/* The running (inverted) CRC ``c`` over ``buf``: slicing by 8. */
static uint32_t crc_tables(uint32_t c, const uint8_t *buf, size_t len)
{
    if (!crc_ready)
        crc_init();
    while (len >= 8) {
        uint32_t lo = c ^ ((uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
                           (uint32_t)buf[3] << 24);
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
            crc_table[3][buf[4]] ^ crc_table[2][buf[5]] ^ crc_table[1][buf[6]] ^ crc_table[0][buf[7]];
        buf += 8;
        len -= 8;
    }
    while (len--)
        c = crc_table[0][(c ^ *buf++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
#include <emmintrin.h>
#include <wmmintrin.h>

/* Blocks shorter than this go through the tables (the folding needs 4 blocks). */
#define FOLD_MIN 64

#define FOLD_TARGET __attribute__((target("pclmul")))   /* SSE2 is x86-64's baseline */

/* Block x carried forward onto block d: x's two halves times k's, plus d. With k =
 * R2:R1 x moves 512 bits on (four blocks in flight), with R4:R3 128 bits. */
FOLD_TARGET static inline __m128i fold(__m128i x, __m128i k, __m128i d)
{
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), d);
}

FOLD_TARGET static inline __m128i block(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }

/* The running (inverted) CRC ``c`` over ``len`` bytes, ``len`` a multiple of 16 and at
 * least FOLD_MIN. */
FOLD_TARGET static uint32_t crc_folded(uint32_t c, const uint8_t *buf, size_t len)
{
    const __m128i r2r1 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);   /* x^(4*128+32), x^(4*128-32) mod P */
    const __m128i r4r3 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);   /* x^(128+32), x^(128-32) mod P */
    const __m128i r5 = _mm_set_epi64x(0, 0x163cd6124);               /* x^64 mod P */
    const __m128i mu_p = _mm_set_epi64x(0x1f7011641, 0x1db710641);   /* Barrett's mu, P (bit-reflected) */
    const __m128i low32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_xor_si128(block(buf), _mm_cvtsi32_si128((int)c));
    __m128i x2 = block(buf + 16), x3 = block(buf + 32), x4 = block(buf + 48);
    buf += 64;
    len -= 64;
    for (; len >= 64; buf += 64, len -= 64) {
        x1 = fold(x1, r2r1, block(buf));
        x2 = fold(x2, r2r1, block(buf + 16));
        x3 = fold(x3, r2r1, block(buf + 32));
        x4 = fold(x4, r2r1, block(buf + 48));
    }
    x1 = fold(x1, r4r3, x2);
    x1 = fold(x1, r4r3, x3);
    x1 = fold(x1, r4r3, x4);
    for (; len >= 16; buf += 16, len -= 16)
        x1 = fold(x1, r4r3, block(buf));
    /* 128 bits to 64, then to 32 (both add the 32 zero bits a CRC appends) */
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), _mm_clmulepi64_si128(r4r3, x1, 0x01));
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), r5, 0x00), _mm_srli_si128(x1, 4));
    /* Barrett's reduction to the 32-bit remainder */
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), mu_p, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), mu_p, 0x00);
    return (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(_mm_xor_si128(t, x1), 4));
}

/* -1 not asked yet, 0 no, 1 yes (the answer is the same for every thread). */
static int has_clmul = -1;

static int clmul(void)
{
    if (has_clmul < 0) {
        __builtin_cpu_init();
        has_clmul = __builtin_cpu_supports("pclmul");
    }
    return has_clmul;
}
#endif

uint32_t nic_crc32_tables(uint32_t crc, const uint8_t *buf, size_t len)
{
    return ~crc_tables(~crc, buf, len);
}

uint32_t nic_crc32(uint32_t crc, const uint8_t *buf, size_t len)
{
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (len >= FOLD_MIN && clmul()) {
        size_t whole = len & ~(size_t)15;
        c = crc_folded(c, buf, whole);
        buf += whole;
        len -= whole;
    }
#endif
    return ~crc_tables(c, buf, len);
}
