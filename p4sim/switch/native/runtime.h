/* The run-time support every pipeline generated in C by p4sim/switch/ccodegen/ includes:
 * values and their BMv2 arithmetic, bit access to frames, the hash algorithms of
 * p4sim/switch/hashes.py, match tables and action profiles (p4sim/switch/tables.py),
 * counters, registers, meters, value sets and the replication engine
 * (p4sim/switch/externs.py). The generated file defines the P4N_* sizes before it
 * includes this header, and the packet driver (driver.h) after its own functions.
 *
 * Values: a field of up to 64 bits lives in one uint64_t slot of the PHV `F` (a signed
 * field holds its sign-extended bits), a wider one in more words (least significant
 * first; up to 128 bits it is read and written as one `v_t`); expressions compute in __int128 (`v_t`) so that
 * the Python engine's unbounded intermediates (a + b before the mask p4c puts after
 * it, a negative difference compared before masking) come out the same. Every access
 * to a frame or a table is bounds-checked; nothing here trusts packet bytes. */
#ifndef P4SIM_NATIVE_RUNTIME_H
#define P4SIM_NATIVE_RUNTIME_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "pipeline.h"

typedef __int128 v_t;
typedef unsigned __int128 u_t;

/* ------------------------------------------------------------ arithmetic (phv.py) */
static inline v_t p4n_add(v_t a, v_t b) { return (v_t)((u_t)a + (u_t)b); }
static inline v_t p4n_sub(v_t a, v_t b) { return (v_t)((u_t)a - (u_t)b); }
static inline v_t p4n_mul(v_t a, v_t b) { return (v_t)((u_t)a * (u_t)b); }
static inline v_t p4n_neg(v_t a) { return (v_t)(0 - (u_t)a); }
static inline v_t p4n_shl(v_t a, v_t n) { return (n < 0 || n >= 128) ? 0 : (v_t)((u_t)a << (int)n); }
static inline v_t p4n_shr(v_t a, v_t n) {
    if (n < 0) return 0;
    if (n >= 127) return a < 0 ? -1 : 0;
    return a >> (int)n;  /* arithmetic, as Python's >> */
}
/* Python's floor division and modulo (BMv2 only divides non-negative values). */
static inline v_t p4n_div(v_t a, v_t b) {
    if (b == 0) return 0;
    v_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}
static inline v_t p4n_mod(v_t a, v_t b) {
    if (b == 0) return 0;
    v_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
/* The unsigned twins, for 128-bit patterns of 2**127 or more (an unsigned 128-bit
 * field; ccodegen/expressions.py `big`): Python's ints are never negative there. */
static inline v_t p4n_ult(v_t a, v_t b) { return (u_t)a < (u_t)b; }
static inline v_t p4n_ugt(v_t a, v_t b) { return (u_t)a > (u_t)b; }
static inline v_t p4n_ule(v_t a, v_t b) { return (u_t)a <= (u_t)b; }
static inline v_t p4n_uge(v_t a, v_t b) { return (u_t)a >= (u_t)b; }
static inline v_t p4n_ushr(v_t a, v_t n) { return (n < 0 || n >= 128) ? 0 : (v_t)((u_t)a >> (int)n); }
static inline v_t p4n_udiv(v_t a, v_t b) { return b == 0 ? 0 : (v_t)((u_t)a / (u_t)b); }
static inline v_t p4n_umod(v_t a, v_t b) { return b == 0 ? 0 : (v_t)((u_t)a % (u_t)b); }
/* A value of two words (a field of 65..128 bits: low word, high word). */
static inline v_t p4n_w2(uint64_t lo, uint64_t hi) { return (v_t)(((u_t)hi << 64) | lo); }
static inline v_t p4n_mask(int w) { return w >= 127 ? (v_t)-1 : (v_t)(((u_t)1 << w) - 1); }
/* phv.sx: wrap into a signed w-bit integer */
static inline v_t p4n_sx(v_t v, int w) {
    v_t half = (v_t)((u_t)1 << (w - 1));
    return p4n_sub(p4n_add(v, half) & p4n_mask(w), half);
}
static inline v_t p4n_usat(v_t v, int w) { v_t top = p4n_mask(w); return v < 0 ? 0 : v > top ? top : v; }
static inline v_t p4n_sat(v_t v, int w) {
    v_t hi = (v_t)(((u_t)1 << (w - 1)) - 1), lo = -hi - 1;
    return v < lo ? lo : v > hi ? hi : v;
}

/* ------------------------------------------------------------ bits of a buffer */
/* `width` (<= 64) bits starting `bitoff` bits into data, zero beyond `len` (phv.peek). */
static inline uint64_t p4n_bits(const uint8_t *data, uint32_t len, uint64_t bitoff, int width) {
    uint64_t first = bitoff >> 3;
    int lead = (int)(bitoff & 7);
    int nbytes = (lead + width + 7) >> 3;
    if (nbytes <= 8) {
        uint64_t acc = 0;
        for (int i = 0; i < nbytes; i++) {
            uint64_t at = first + (uint64_t)i;
            acc = (acc << 8) | (at < len ? data[at] : 0);
        }
        acc >>= (nbytes * 8 - lead - width);
        return width == 64 ? acc : acc & (((uint64_t)1 << width) - 1);
    }
    u_t acc = 0;
    for (int i = 0; i < nbytes; i++) {
        uint64_t at = first + (uint64_t)i;
        acc = (acc << 8) | (at < len ? data[at] : 0);
    }
    acc >>= (nbytes * 8 - lead - width);
    return (uint64_t)(acc & (((u_t)1 << width) - 1));
}

/* A varbit value of `nbits` bits (<= 64 * n) at `bitoff`, right-aligned into words `w`
 * (least significant first), zero beyond `len`: the Python engine's int of a varbit. */
static void p4n_get_vl(const uint8_t *data, uint32_t len, uint64_t bitoff, uint64_t *w, int n,
                       uint64_t nbits) {
    if (nbits > (uint64_t)n * 64) nbits = (uint64_t)n * 64;
    int full = (int)(nbits / 64), top = (int)(nbits % 64);
    for (int i = 0; i < n; i++) w[i] = 0;
    for (int i = 0; i < full; i++) w[i] = p4n_bits(data, len, bitoff + nbits - 64 * (uint64_t)(i + 1), 64);
    if (top) w[full] = p4n_bits(data, len, bitoff, top);
}

/* A growable bit string: BMv2's BufBuilder for hash inputs, and the deparser's output. */
typedef struct {
    uint8_t *buf;
    uint32_t cap;     /* bytes */
    uint64_t nbits;
    int overflow;
} p4n_bitbuf;

static inline void p4n_put(p4n_bitbuf *b, uint64_t value, int width) {
    if (width <= 0) return;
    if (((b->nbits + (uint64_t)width + 7) >> 3) > b->cap) { b->overflow = 1; return; }
    if (width < 64) value &= ((uint64_t)1 << width) - 1;
    int fill = (int)(b->nbits & 7);
    if (fill) {  /* complete the partly written byte first */
        int room = 8 - fill;
        uint8_t *at = &b->buf[b->nbits >> 3];
        if (width <= room) {
            *at |= (uint8_t)(value << (room - width));
            b->nbits += (uint64_t)width;
            return;
        }
        *at |= (uint8_t)(value >> (width - room));
        width -= room;
        b->nbits += (uint64_t)room;
        value &= ((uint64_t)1 << width) - 1;
    }
    while (width >= 8) {
        width -= 8;
        b->buf[b->nbits >> 3] = (uint8_t)(value >> width);
        b->nbits += 8;
    }
    if (width) {  /* a new byte: its low bits stay zero until written */
        b->buf[b->nbits >> 3] = (uint8_t)(value << (8 - width));
        b->nbits += (uint64_t)width;
    }
}
/* The `nbits` low bits of a value of words `w` (least significant first), MSB first. */
static void p4n_put_vl(p4n_bitbuf *b, const uint64_t *w, int n, uint64_t nbits) {
    if (nbits > (uint64_t)n * 64) nbits = (uint64_t)n * 64;
    int full = (int)(nbits / 64), top = (int)(nbits % 64);
    if (top) p4n_put(b, w[full], top);
    for (int i = full - 1; i >= 0; i--) p4n_put(b, w[i], 64);
}
static inline uint32_t p4n_bytes(const p4n_bitbuf *b) { return (uint32_t)((b->nbits + 7) >> 3); }

/* ------------------------------------------------------------ hashes (hashes.py) */
typedef struct {
    int width;
    uint64_t poly, init, xor_out, mask;
    int refin, refout;
    uint64_t table[256];
    uint8_t in[256];        /* each input byte, reflected when refin */
} p4n_crc;

static uint64_t p4n_reflect(uint64_t v, int n) {
    uint64_t out = 0;
    for (int i = 0; i < n; i++) { out = (out << 1) | (v & 1); v >>= 1; }
    return out;
}

static void p4n_crc_set(p4n_crc *c, int width, uint64_t poly, uint64_t init, uint64_t xor_out,
                        int refin, int refout) {
    uint64_t mask = width == 64 ? ~(uint64_t)0 : (((uint64_t)1 << width) - 1);
    uint64_t top = (uint64_t)1 << (width - 1);
    c->width = width; c->mask = mask;
    c->poly = poly & mask; c->init = init & mask; c->xor_out = xor_out & mask;
    c->refin = refin; c->refout = refout;
    for (uint64_t d = 0; d < 256; d++) {
        c->in[d] = (uint8_t)(refin ? p4n_reflect(d, 8) : d);
        uint64_t rem = (d << (width - 8)) & mask;
        for (int k = 0; k < 8; k++)
            rem = (rem & top) ? (((rem << 1) ^ c->poly) & mask) : ((rem << 1) & mask);
        c->table[d] = rem;
    }
}

static uint64_t p4n_crc_run(const p4n_crc *c, const uint8_t *a, uint32_t na,
                            const uint8_t *b, uint32_t nb) {
    uint64_t rem = c->init;
    int shift = c->width - 8;
    for (uint32_t i = 0; i < na + nb; i++) {
        uint8_t byte = c->in[i < na ? a[i] : b[i - na]];
        rem = c->table[(byte ^ (rem >> shift)) & 0xFF] ^ ((rem << 8) & c->mask);
    }
    if (c->refout) rem = p4n_reflect(rem, c->width);
    return (rem ^ c->xor_out) & c->mask;
}

static uint64_t p4n_csum16(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb) {
    uint64_t sum = 0;
    uint32_t n = na + nb;
    for (uint32_t i = 0; i < n; i += 2) {
        uint32_t hi = i < na ? a[i] : b[i - na];
        uint32_t lo = i + 1 >= n ? 0 : (i + 1 < na ? a[i + 1] : b[i + 1 - na]);
        sum += (hi << 8) | lo;
    }
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return (~sum) & 0xFFFF;
}

static uint64_t p4n_xor_words(int nbytes, const uint8_t *a, uint32_t na, const uint8_t *b,
                              uint32_t nb) {
    uint64_t out = 0, word = 0;
    uint32_t n = na + nb;
    for (uint32_t i = 0; i < n; i++) {
        word = (word << 8) | (i < na ? a[i] : b[i - na]);
        if ((i + 1) % (uint32_t)nbytes == 0) { out ^= word; word = 0; }
    }
    if (n % (uint32_t)nbytes) { word <<= 8 * (nbytes - n % (uint32_t)nbytes); out ^= word; }
    return out;
}

static uint64_t p4n_identity(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb) {
    uint64_t out = 0;
    for (uint32_t i = 0; i < na + nb && i < 8; i++) out = (out << 8) | (i < na ? a[i] : b[i - na]);
    return out;
}

/* ------------------------------------------------------------ random (phv.rng) */
/* Python's Mersenne Twister, so that `random` draws the numbers the Python engine
 * would from the same state (NativeSwitch loads the state of Python's `random`). */
typedef struct { uint32_t mt[624]; uint32_t index; } p4n_mt;

static uint32_t p4n_mt_next(p4n_mt *r) {
    if (r->index >= 624) {
        for (int i = 0; i < 624; i++) {
            uint32_t y = (r->mt[i] & 0x80000000u) | (r->mt[(i + 1) % 624] & 0x7fffffffu);
            r->mt[i] = r->mt[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1) ? 0x9908b0dfu : 0);
        }
        r->index = 0;
    }
    uint32_t y = r->mt[r->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

static double p4n_random(p4n_mt *r) {   /* random.random() */
    uint32_t a = p4n_mt_next(r) >> 5, b = p4n_mt_next(r) >> 6;
    return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

/* phv.rng: uniform on [lo, hi] (lo when hi < lo), for spans below 2**53 */
static v_t p4n_rng(p4n_mt *r, v_t lo, v_t hi) {
    v_t span = hi - lo + 1;
    if (span <= 0) return lo;
    return lo + (v_t)(int64_t)(p4n_random(r) * (double)span);
}

/* ------------------------------------------------------------ meters (externs.Meter) */
typedef struct {
    int configured, packets, n;
    int64_t t0;
    double rate[4];
    int64_t burst[4], tokens[4], last[4];
    int color[4];
} p4n_meter;

static int p4n_meter_execute(p4n_meter *m, int64_t now, uint32_t nbytes) {
    if (!m->configured) return 0;
    int64_t micros = now - m->t0;
    int64_t need = m->packets ? 1 : (int64_t)nbytes;
    for (int i = 0; i < m->n; i++) {
        int64_t since = (int64_t)((double)micros * m->rate[i]);
        int64_t add = since - m->last[i];
        m->last[i] = since;
        int64_t t = m->tokens[i] + add;
        m->tokens[i] = t < m->burst[i] ? t : m->burst[i];
        if (m->tokens[i] < need) return m->color[i];
        m->tokens[i] -= need;
    }
    return 0;
}

/* ------------------------------------------------------------ tables (tables.py) */
enum { P4N_EXACT = 0, P4N_LPM = 1, P4N_SCAN = 2 };
#define P4N_MAX_LPM 128          /* the widest LPM field (ccodegen/tables.py refuses more) */
enum { P4N_SIMPLE = 0, P4N_INDIRECT = 1, P4N_INDIRECT_WS = 2 };

typedef struct p4n_entry {
    uint32_t handle;
    int64_t priority;
    int plen;
    uint64_t hash;
    struct p4n_entry *chain;     /* exact/lpm: next in the hash bucket */
    int32_t action;              /* simple tables */
    int32_t mbr, grp;            /* indirect tables (-1: none) */
    uint64_t pkts, bytes;        /* direct counter */
    p4n_meter meter;             /* direct meter */
    uint64_t args[P4N_MAX_ARGS + 1];
    uint64_t *lo, *hi;           /* per key word: value/mask, or low/high for a range */
    uint8_t *range;              /* per key word: 0, or the words of a range starting here
                                  * (the lookup skips its other words) */
} p4n_entry;

typedef struct {
    int nkeys, mode, kind, lpm_idx, lpm_width;
    int profile;                 /* action profile index, -1 for simple tables */
    p4n_entry **by_handle;
    uint32_t nhandles;
    p4n_entry **buckets;         /* exact/lpm */
    uint32_t nbuckets, count;
    uint32_t plen_count[P4N_MAX_LPM + 1];
    p4n_entry **scan;            /* scan: by (priority, handle) */
    uint32_t nscan, scan_cap;
    int32_t def_action, def_mbr, def_grp;   /* default entry; def_action -1: none */
    uint64_t def_args[P4N_MAX_ARGS + 1];
} p4n_table;

typedef struct {
    int32_t action;
    uint64_t args[P4N_MAX_ARGS + 1];
    int used;
} p4n_member;

typedef struct {
    p4n_member *members;
    uint32_t nmembers;
    uint32_t **groups;       /* group handle -> [n, member handles sorted...] */
    uint32_t ngroups;
} p4n_profile;

static uint64_t p4n_key_hash(const uint64_t *k, int n, int plen) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)plen;
    for (int i = 0; i < n; i++) { h ^= k[i]; h *= 1099511628211ULL; h ^= h >> 29; }
    return h;
}

static int p4n_key_eq(const p4n_entry *e, const uint64_t *k, int n, int plen) {
    if (e->plen != plen) return 0;
    for (int i = 0; i < n; i++) if (e->lo[i] != k[i]) return 0;
    return 1;
}

static int p4n_rehash(p4n_table *t, uint32_t nb) {
    p4n_entry **b = calloc(nb, sizeof *b);
    if (!b) return -1;
    for (uint32_t i = 0; i < t->nbuckets; i++) {
        p4n_entry *e = t->buckets[i];
        while (e) {
            p4n_entry *nx = e->chain;
            e->chain = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
            e = nx;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
    return 0;
}

static p4n_entry *p4n_find(const p4n_table *t, const uint64_t *k, int plen) {
    if (!t->nbuckets) return NULL;
    uint64_t h = p4n_key_hash(k, t->nkeys, plen);
    for (p4n_entry *e = t->buckets[h & (t->nbuckets - 1)]; e; e = e->chain)
        if (e->hash == h && p4n_key_eq(e, k, t->nkeys, plen)) return e;
    return NULL;
}

/* Whether the n-word key k (most significant first) is within [lo, hi]. */
static int p4n_in_range(const uint64_t *k, const uint64_t *lo, const uint64_t *hi, int n) {
    int above = 0, below = 0;   /* k > lo, k < hi already decided by a higher word */
    for (int i = 0; i < n; i++) {
        if (!above) { if (k[i] < lo[i]) return 0; if (k[i] > lo[i]) above = 1; }
        if (!below) { if (k[i] > hi[i]) return 0; if (k[i] < hi[i]) below = 1; }
    }
    return 1;
}

static p4n_entry *p4n_lookup(const p4n_table *t, const uint64_t *k) {
    if (t->mode == P4N_EXACT) return p4n_find(t, k, 0);
    if (t->mode == P4N_LPM) {
        /* the LPM field is words lpm_idx.. of the key, most significant first */
        uint64_t kk[P4N_MAX_KEYS + 1];
        memcpy(kk, k, sizeof(uint64_t) * (size_t)t->nkeys);
        int w = t->lpm_width, nw = (w + 63) / 64;
        for (int plen = w; plen >= 0; plen--) {
            if (!t->plen_count[plen]) continue;
            for (int j = 0, at = 0; j < nw && t->lpm_idx + j < t->nkeys; j++) {
                int wj = j == 0 ? w - 64 * (nw - 1) : 64;
                int keep = plen - at < 0 ? 0 : plen - at > wj ? wj : plen - at;
                uint64_t full = wj == 64 ? ~(uint64_t)0 : (((uint64_t)1 << wj) - 1);
                kk[t->lpm_idx + j] = keep == 0 ? 0 : k[t->lpm_idx + j] & (full ^ (keep == 64 ? 0 : (full >> keep)));
                at += wj;
            }
            p4n_entry *e = p4n_find(t, kk, plen);
            if (e) return e;
        }
        return NULL;
    }
    for (uint32_t i = 0; i < t->nscan; i++) {
        p4n_entry *e = t->scan[i];
        int ok = 1;
        for (int j = 0; j < t->nkeys && ok; j++) {
            if (!e->range[j]) { ok = (k[j] & e->hi[j]) == e->lo[j]; continue; }
            ok = p4n_in_range(k + j, e->lo + j, e->hi + j, e->range[j]);
            j += e->range[j] - 1;
        }
        if (ok) return e;
    }
    return NULL;
}

static int p4n_scan_before(const p4n_entry *a, const p4n_entry *b) {
    return a->priority < b->priority || (a->priority == b->priority && a->handle < b->handle);
}

/* Insert an entry under `handle` (the Python table chose and validated it). */
static int p4n_table_insert(p4n_table *t, uint32_t handle, const uint64_t *lo, const uint64_t *hi,
                            const uint8_t *range, int plen, int64_t priority, int action,
                            const uint64_t *args, int nargs, int mbr, int grp) {
    if (nargs < 0 || nargs > P4N_MAX_ARGS || t->nkeys > P4N_MAX_KEYS) return -1;
    if (handle >= t->nhandles) {
        uint32_t n = t->nhandles ? t->nhandles : 16;
        while (n <= handle) n *= 2;
        p4n_entry **bh = realloc(t->by_handle, n * sizeof *bh);
        if (!bh) return -1;
        memset(bh + t->nhandles, 0, (n - t->nhandles) * sizeof *bh);
        t->by_handle = bh;
        t->nhandles = n;
    }
    if (t->by_handle[handle]) return -1;
    size_t nk = (size_t)t->nkeys;
    p4n_entry *e = calloc(1, sizeof *e + sizeof(uint64_t) * 2 * nk + nk + 1);
    if (!e) return -1;
    e->lo = (uint64_t *)(e + 1);
    e->hi = e->lo + nk;
    e->range = (uint8_t *)(e->hi + nk);
    memcpy(e->lo, lo, nk * sizeof(uint64_t));
    memcpy(e->hi, hi, nk * sizeof(uint64_t));
    memcpy(e->range, range, nk);
    for (size_t j = 0; j < nk; j++)   /* a range's words stay inside the key */
        if (e->range[j] > nk - j) { free(e); return -1; }
    if (nargs) memcpy(e->args, args, (size_t)nargs * sizeof(uint64_t));
    e->handle = handle; e->priority = priority; e->plen = plen;
    e->action = action; e->mbr = mbr; e->grp = grp;
    if (t->mode == P4N_SCAN) {
        if (t->nscan == t->scan_cap) {
            uint32_t n = t->scan_cap ? t->scan_cap * 2 : 16;
            p4n_entry **s = realloc(t->scan, n * sizeof *s);
            if (!s) { free(e); return -1; }
            t->scan = s; t->scan_cap = n;
        }
        uint32_t at = t->nscan;
        while (at > 0 && p4n_scan_before(e, t->scan[at - 1])) at--;
        memmove(t->scan + at + 1, t->scan + at, (t->nscan - at) * sizeof *t->scan);
        t->scan[at] = e;
        t->nscan++;
    } else {
        if ((t->count + 1) * 4 > t->nbuckets * 3 &&
            p4n_rehash(t, t->nbuckets ? t->nbuckets * 2 : 64)) { free(e); return -1; }
        e->hash = p4n_key_hash(e->lo, t->nkeys, t->mode == P4N_LPM ? plen : 0);
        if (t->mode == P4N_EXACT) e->plen = 0;
        p4n_entry **b = &t->buckets[e->hash & (t->nbuckets - 1)];
        e->chain = *b;
        *b = e;
        t->count++;
        if (t->mode == P4N_LPM && plen >= 0 && plen <= P4N_MAX_LPM) t->plen_count[plen]++;
    }
    t->by_handle[handle] = e;
    return 0;
}

static p4n_entry *p4n_table_get(p4n_table *t, uint32_t handle) {
    return handle < t->nhandles ? t->by_handle[handle] : NULL;
}

static int p4n_table_remove(p4n_table *t, uint32_t handle) {
    p4n_entry *e = p4n_table_get(t, handle);
    if (!e) return -1;
    if (t->mode == P4N_SCAN) {
        for (uint32_t i = 0; i < t->nscan; i++)
            if (t->scan[i] == e) {
                memmove(t->scan + i, t->scan + i + 1, (t->nscan - i - 1) * sizeof *t->scan);
                t->nscan--;
                break;
            }
    } else {
        p4n_entry **b = &t->buckets[e->hash & (t->nbuckets - 1)];
        while (*b && *b != e) b = &(*b)->chain;
        if (*b) *b = e->chain;
        t->count--;
        if (t->mode == P4N_LPM && e->plen >= 0 && e->plen <= P4N_MAX_LPM) t->plen_count[e->plen]--;
    }
    t->by_handle[handle] = NULL;
    free(e);
    return 0;
}

static void p4n_table_free(p4n_table *t) {
    for (uint32_t h = 0; h < t->nhandles; h++) free(t->by_handle[h]);
    free(t->by_handle); free(t->buckets); free(t->scan);
    memset(t, 0, sizeof *t);
}

/* Members in group `grp` (0 for none): the selector's hash is computed only when there
 * are some, as ActionProfile.choose does (a stateful hash must not advance otherwise). */
static uint32_t p4n_group_size(const p4n_profile *pr, int32_t grp) {
    if (grp < 0 || (uint32_t)grp >= pr->ngroups || !pr->groups[grp]) return 0;
    return pr->groups[grp][0];
}

/* members_sorted_by_handle[hash % n] of a non-empty group (ActionProfile.choose) */
static p4n_member *p4n_group_pick(p4n_profile *pr, int32_t grp, uint64_t hash) {
    uint32_t *g = pr->groups[grp];
    uint32_t mbr = g[1 + hash % g[0]];
    return mbr < pr->nmembers && pr->members[mbr].used ? &pr->members[mbr] : NULL;
}

static p4n_member *p4n_member_of(p4n_profile *pr, int32_t mbr) {
    if (mbr < 0 || (uint32_t)mbr >= pr->nmembers || !pr->members[mbr].used) return NULL;
    return &pr->members[mbr];
}

/* ------------------------------------------------------------ value sets (externs.ValueSet) */
typedef struct {
    uint32_t n;
    uint64_t *value, *mask;     /* exact values have mask ~0 */
} p4n_vset;

static int p4n_vset_match(const p4n_vset *v, uint64_t key) {
    for (uint32_t i = 0; i < v->n; i++) if ((key & v->mask[i]) == v->value[i]) return 1;
    return 0;
}
static int p4n_vset_match_masked(const p4n_vset *v, uint64_t key, uint64_t mask) {
    key &= mask;
    for (uint32_t i = 0; i < v->n; i++) if ((key & v->mask[i]) == (v->value[i] & mask)) return 1;
    return 0;
}

/* ------------------------------------------------------------ packet registers */
/* Why a packet's run failed where the Python engine raises (p4n_last_error). */
enum { P4N_ERR_NONE, P4N_ERR_INDEX, P4N_ERR_ASSERT, P4N_ERR_ASSUME, P4N_ERR_SIZE, P4N_ERR_VARBIT };

typedef struct {
    uint32_t ilen;              /* ingress length: counters and meters count it */
    int64_t plen;               /* packet_length register */
    uint32_t passes;
    int32_t clone;              /* -1: none */
    uint32_t clone_fl, resubmit, recirc, learn;
    int64_t trunc;              /* -1: none */
    int ex;                     /* `exit` ran: the control ends */
    int err;                    /* P4N_ERR_*: the packet is lost (Python raised) */
    const uint8_t *payload;     /* bytes after the parsed headers */
    uint32_t paylen;
} p4n_state;

static inline void p4n_state_init(p4n_state *S, uint32_t ilen, int64_t plen, uint32_t passes) {
    memset(S, 0, sizeof *S);
    S->ilen = ilen; S->plen = plen; S->passes = passes;
    S->clone = -1; S->trunc = -1;
}

/* ------------------------------------------------------------ the pipeline's state */
typedef struct { int32_t port, mgrp; } p4n_session;     /* -1: unset */
typedef struct { uint32_t mgrp, n; uint32_t *ports, *rids; } p4n_mgrp;

struct p4n_pipeline {
    int64_t now;
    p4n_table tables[P4N_NTABLES + 1];
    p4n_profile profiles[P4N_NPROFILES + 1];
    uint64_t *cnt_pkts[P4N_NCOUNTERS + 1], *cnt_bytes[P4N_NCOUNTERS + 1];
    uint64_t *regs[P4N_NREGISTERS + 1];
    p4n_meter *meters[P4N_NMETERS + 1];
    p4n_vset vsets[P4N_NVSETS + 1];
    p4n_crc crcs[P4N_NCALCS + 1];
    uint64_t rr[P4N_NCALCS + 1];           /* round_robin state */
    p4n_mt rng;
    p4n_session sessions[65536];
    p4n_mgrp *mgrps;
    uint32_t nmgrps;
    uint64_t *digests;                     /* [list id, n values, values...]* */
    uint32_t ndigest, digest_cap;
    uint64_t dropped_passes;               /* packets dropped after MAX_PASSES */
    int sent;                              /* the last egress sent a frame (maybe empty) */
    int error;                             /* P4N_ERR_* of the last failed run */
};

static p4n_mgrp *p4n_mgrp_find(p4n_pipeline *p, uint32_t mgrp) {
    for (uint32_t i = 0; i < p->nmgrps; i++) if (p->mgrps[i].mgrp == mgrp) return &p->mgrps[i];
    return NULL;
}

static void p4n_digest_push(p4n_pipeline *p, uint32_t list, const uint64_t *F, const int *slots,
                            int n) {
    uint32_t need = p->ndigest + 2 + (uint32_t)n;
    if (need > p->digest_cap) {
        uint32_t cap = p->digest_cap ? p->digest_cap : 256;
        while (cap < need) cap *= 2;
        uint64_t *d = realloc(p->digests, cap * sizeof *d);
        if (!d) return;
        p->digests = d; p->digest_cap = cap;
    }
    p->digests[p->ndigest++] = list;
    p->digests[p->ndigest++] = (uint64_t)n;
    for (int i = 0; i < n; i++) p->digests[p->ndigest++] = F[slots[i]];
}

#endif
