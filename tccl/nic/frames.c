/* RoCEv2 frames: built from a QP's headers, patched per packet, and parsed -- the C
 * side of tccl/roce.py, bit for bit (tests compare both). The ICRC is CRC-32 (zlib's)
 * over 8 bytes of 0xFF, the IPv4/UDP/BTH headers with TOS, TTL, both checksums and the
 * BTH's FECN/BECN byte set to all ones, then the rest of the packet up to the ICRC,
 * stored least-significant byte first. */
#include <string.h>

#include "nic.h"

static inline uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static inline uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void put16(uint8_t *p, uint32_t v) { p[0] = v >> 8; p[1] = v; }
static inline void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

static uint32_t ip_checksum(const uint8_t *ip)
{
    uint32_t total = 0;
    for (int i = 0; i < NIC_IP_LEN; i += 2)
        total += be16(ip + i);
    while (total >> 16)
        total = (total & 0xFFFF) + (total >> 16);
    return ~total & 0xFFFF;
}

/* The CRC of 8 x 0xFF and the masked IPv4/UDP/BTH headers of frame[0:NIC_HDR_LEN]. */
static uint32_t head_crc(const uint8_t *frame)
{
    uint8_t head[NIC_HDR_LEN - NIC_ETH_LEN];
    static const uint8_t ff8[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    memcpy(head, frame + NIC_ETH_LEN, sizeof head);
    head[NIC_TOS_AT] = head[NIC_TTL_AT] = head[NIC_BTH_MASKED_AT] = 0xFF;
    head[NIC_IP_CSUM_AT] = head[NIC_IP_CSUM_AT + 1] = 0xFF;
    head[NIC_UDP_CSUM_AT] = head[NIC_UDP_CSUM_AT + 1] = 0xFF;
    return nic_crc32(nic_crc32(0, ff8, 8), head, sizeof head);
}

size_t nic_frame(const nic_template *t, uint8_t opcode, uint32_t psn, int flags,
                 const uint8_t *ext, size_t ext_len, const uint8_t *payload, size_t plen,
                 uint8_t *out, size_t cap)
{
    size_t total = NIC_HDR_LEN + ext_len + plen + NIC_ICRC_LEN;
    size_t udp_len = NIC_UDP_LEN + NIC_BTH_LEN + ext_len + plen + NIC_ICRC_LEN;
    if (total > cap || NIC_IP_LEN + udp_len > 0xFFFF)
        return 0;
    memcpy(out, t->hdr, NIC_HDR_LEN);
    uint8_t *ip = out + NIC_IP_OFF;
    put16(ip + NIC_IP_LEN_AT, NIC_IP_LEN + udp_len);
    put16(ip + NIC_IP_CSUM_AT, 0);
    put16(ip + NIC_IP_CSUM_AT, ip_checksum(ip));
    put16(out + NIC_UDP_OFF + NIC_UDP_LEN_AT, udp_len);
    out[NIC_BTH_OFF] = opcode;
    if (flags & NIC_F_BECN)
        out[NIC_BTH_OFF + NIC_BTH_FECN_AT] |= NIC_BECN_BIT;
    put32(out + NIC_BTH_OFF + NIC_BTH_PSN_AT, ((flags & NIC_F_ACKREQ) ? NIC_ACKREQ_BIT : 0) | (psn & NIC_PSN_MASK));
    if (ext_len)
        memcpy(out + NIC_HDR_LEN, ext, ext_len);
    if (plen)
        memcpy(out + NIC_HDR_LEN + ext_len, payload, plen);
    uint32_t crc = nic_crc32(head_crc(out), out + NIC_HDR_LEN, ext_len + plen);
    uint8_t *icrc = out + NIC_HDR_LEN + ext_len + plen;
    icrc[0] = crc; icrc[1] = crc >> 8; icrc[2] = crc >> 16; icrc[3] = crc >> 24;
    return total;
}

size_t nic_ack(const nic_template *t, uint32_t psn, uint32_t msn, int nak, uint8_t *out, size_t cap)
{
    uint8_t aeth[NIC_AETH_LEN];
    put32(aeth, (uint32_t)(nak ? NIC_AETH_NAK_SEQ : NIC_AETH_ACK) << NIC_SYNDROME_SHIFT | (msn & NIC_MSN_MASK));
    return nic_frame(t, NIC_ACKNOWLEDGE, psn, 0, aeth, sizeof aeth, NULL, 0, out, cap);
}

size_t nic_cnp(const nic_template *t, uint8_t *out, size_t cap)
{
    static const uint8_t pad[NIC_CNP_PAD_LEN];
    return nic_frame(t, NIC_CNP, 0, NIC_F_BECN, NULL, 0, pad, sizeof pad, out, cap);
}

uint32_t nic_icrc(const uint8_t *frame, size_t len)
{
    if (len < NIC_HDR_LEN + NIC_ICRC_LEN)
        return 0;
    return nic_crc32(head_crc(frame), frame + NIC_HDR_LEN, len - NIC_HDR_LEN - NIC_ICRC_LEN);
}

int nic_icrc_ok(const uint8_t *frame, size_t len)
{
    if (len < NIC_HDR_LEN + NIC_ICRC_LEN)
        return 0;
    const uint8_t *p = frame + len - NIC_ICRC_LEN;
    uint32_t stored = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return stored == nic_icrc(frame, len);
}

int nic_parse(const uint8_t *f, size_t len, nic_parsed *p)
{
    if (len < NIC_HDR_LEN + NIC_ICRC_LEN || be16(f + NIC_ETHERTYPE_AT) != NIC_ETHERTYPE_IPV4 ||
        f[NIC_IP_OFF + NIC_VIHL_AT] != NIC_PLAIN_IPV4 || f[NIC_IP_OFF + NIC_PROTOCOL_AT] != NIC_PROTO_UDP ||
        be16(f + NIC_UDP_OFF + NIC_DPORT_AT) != NIC_ROCE_UDP_PORT)
        return 0;
    long end = (long)NIC_IP_OFF + (long)be16(f + NIC_IP_OFF + NIC_IP_LEN_AT) - NIC_ICRC_LEN;
    if (end < NIC_HDR_LEN || (size_t)end + NIC_ICRC_LEN > len)
        return 0;
    const uint8_t *bth = f + NIC_BTH_OFF;
    uint32_t dqpn_word = be32(bth + NIC_BTH_FECN_AT), psn_word = be32(bth + NIC_BTH_PSN_AT);
    long off = NIC_HDR_LEN;
    p->opcode = bth[0];
    p->syndrome = 0;
    p->msn = 0;
    if (p->opcode == NIC_ACKNOWLEDGE) {
        if (end < NIC_HDR_LEN + NIC_AETH_LEN)
            return 0;
        uint32_t aeth = be32(f + NIC_HDR_LEN);
        p->syndrome = aeth >> NIC_SYNDROME_SHIFT;
        p->msn = aeth & NIC_MSN_MASK;
        off += NIC_AETH_LEN;
    } else if (p->opcode == NIC_WRITE_FIRST || p->opcode == NIC_WRITE_ONLY) {
        off += NIC_RETH_LEN;
    }
    if (off > end)
        return 0;
    p->ecn = f[NIC_IP_OFF + NIC_ECN_AT] & NIC_ECN_MASK;
    p->sport = be16(f + NIC_UDP_OFF + NIC_SPORT_AT);
    p->dqpn = dqpn_word & NIC_DQPN_MASK;
    p->ackreq = (psn_word & NIC_ACKREQ_BIT) != 0;
    p->psn = psn_word & NIC_PSN_MASK;
    p->payload_off = off;
    p->payload_end = end;
    return 1;
}

int32_t nic_psn_diff(uint32_t a, uint32_t b)
{
    int32_t d = (a - b) & NIC_PSN_MASK;
    return d > (int32_t)(NIC_PSN_MASK >> 1) ? d - (int32_t)(NIC_PSN_MASK + 1) : d;
}
