/* Operations on headers chosen at run time (header stack elements): `phv.HeaderOps` of
 * the Python engine, on the layout tables the generated file defines before including
 * this (p4n_hv, p4n_hf, p4n_hnf, p4n_hneq, p4n_hbytes: per header id; ccodegen/layout.py).
 * A header's p4n_hf row is every word of its fields (wide ones have several) and then
 * its varbit lengths, which `==` does not compare (p4n_hneq words are compared). */
#ifndef P4SIM_NATIVE_HEADERS_H
#define P4SIM_NATIVE_HEADERS_H

/* Element `index` of a stack of `size` header ids, with Python's indexing: a negative
 * index counts from the end; outside the stack the packet is lost (the Python engine
 * raises IndexError there) and element 0 stands in so nothing is read out of bounds. */
static inline int p4n_stack_at(p4n_state *S, const int *ids, int size, v_t index) {
    if (index < 0) index += size;
    if (index < 0 || index >= size) { S->err = P4N_ERR_INDEX; return ids[0]; }
    return ids[(int)index];
}

static inline int p4n_hid_ok(int hid) { return hid >= 0 && hid < P4N_NHEADERS; }

/* a union member made valid makes the other members invalid */
static void p4n_h_siblings_off(uint64_t *F, int hid) {
    for (int i = 0; i < p4n_hnsib[hid]; i++) F[p4n_hsib[hid][i]] = 0;
}

/* BMv2 add_header: zero an invalid header and make it valid */
static void p4n_h_set_valid(uint64_t *F, p4n_state *S, int hid) {
    if (!p4n_hid_ok(hid) || F[p4n_hv[hid]]) return;
    for (int i = 0; i < p4n_hnf[hid]; i++) F[p4n_hf[hid][i]] = 0;
    F[p4n_hv[hid]] = 1;
    p4n_h_siblings_off(F, hid);
    S->plen += p4n_hbytes[hid];
}

/* BMv2 remove_header */
static void p4n_h_set_invalid(uint64_t *F, p4n_state *S, int hid) {
    if (!p4n_hid_ok(hid) || !F[p4n_hv[hid]]) return;
    S->plen -= p4n_hbytes[hid];
    F[p4n_hv[hid]] = 0;
}

/* BMv2 assign_header: validity, and every field when valid */
static void p4n_h_copy(uint64_t *F, int dst, int src) {
    if (!p4n_hid_ok(dst) || !p4n_hid_ok(src)) return;
    if (!F[p4n_hv[src]]) { F[p4n_hv[dst]] = 0; return; }
    F[p4n_hv[dst]] = 1;
    p4n_h_siblings_off(F, dst);
    int n = p4n_hnf[dst] < p4n_hnf[src] ? p4n_hnf[dst] : p4n_hnf[src];
    for (int i = 0; i < n; i++) F[p4n_hf[dst][i]] = F[p4n_hf[src][i]];
}

static void p4n_h_swap(uint64_t *F, int a, int b) {
    uint64_t t = F[p4n_hv[a]];
    F[p4n_hv[a]] = F[p4n_hv[b]];
    F[p4n_hv[b]] = t;
    int n = p4n_hnf[a] < p4n_hnf[b] ? p4n_hnf[a] : p4n_hnf[b];
    for (int i = 0; i < n; i++) {
        t = F[p4n_hf[a][i]];
        F[p4n_hf[a][i]] = F[p4n_hf[b][i]];
        F[p4n_hf[b][i]] = t;
    }
}

/* BMv2 ==h: both invalid, or both valid with equal fields */
static int p4n_h_equal(const uint64_t *F, int a, int b) {
    if (!p4n_hid_ok(a) || !p4n_hid_ok(b)) return 0;
    if (!F[p4n_hv[a]] || !F[p4n_hv[b]]) return !F[p4n_hv[a]] && !F[p4n_hv[b]];
    int n = p4n_hneq[a] < p4n_hneq[b] ? p4n_hneq[a] : p4n_hneq[b];
    for (int i = 0; i < n; i++) if (F[p4n_hf[a][i]] != F[p4n_hf[b][i]]) return 0;
    return 1;
}

static inline int p4n_uid_ok(int uid) { return uid >= 0 && uid < P4N_NUNIONS; }

/* ==u: every member pair equal (`==h`) */
static int p4n_u_equal(const uint64_t *F, int a, int b) {
    if (!p4n_uid_ok(a) || !p4n_uid_ok(b)) return 0;
    for (int i = 0; i < p4n_unm[a] && i < p4n_unm[b]; i++)
        if (!p4n_h_equal(F, p4n_uh[a][i], p4n_uh[b][i])) return 0;
    return 1;
}

/* a union is valid when one of its members is */
static int p4n_u_valid(const uint64_t *F, int u) {
    if (!p4n_uid_ok(u)) return 0;
    for (int i = 0; i < p4n_unm[u]; i++) if (F[p4n_hv[p4n_uh[u][i]]]) return 1;
    return 0;
}

/* a stack element: one header, or (unions) every member of one union */
static void p4n_elem_swap(uint64_t *F, int a, int b, int unions) {
    if (!unions) { p4n_h_swap(F, a, b); return; }
    for (int i = 0; i < p4n_unm[a] && i < p4n_unm[b]; i++) p4n_h_swap(F, p4n_uh[a][i], p4n_uh[b][i]);
}

static void p4n_elem_invalidate(uint64_t *F, int e, int unions) {
    if (!unions) { F[p4n_hv[e]] = 0; return; }
    for (int i = 0; i < p4n_unm[e]; i++) F[p4n_hv[p4n_uh[e][i]]] = 0;
}

/* P4-16 push_front(num) as BMv2's StackP4_16 (phv.HeaderOps.push_front) */
static void p4n_push_front(uint64_t *F, const int *ids, int size, int count_slot, v_t num,
                           int unions) {
    if (num <= 0) return;
    v_t count = (v_t)F[count_slot] + num;
    F[count_slot] = (uint64_t)(count < size ? count : size);
    for (v_t i = size - 1; i >= num; i--) p4n_elem_swap(F, ids[(int)i], ids[(int)(i - num)], unions);
    for (v_t i = 0; i < size && i < num; i++) p4n_elem_invalidate(F, ids[(int)i], unions);
}

/* P4-16 pop_front(num) as BMv2's StackP4_16 (phv.HeaderOps.pop_front) */
static void p4n_pop_front(uint64_t *F, const int *ids, int size, int count_slot, v_t num,
                          int unions) {
    if (num <= 0) return;
    F[count_slot] -= (v_t)F[count_slot] < num ? F[count_slot] : (uint64_t)num;
    int i = 0;
    if (num < size) {
        for (i = 0; i < size - (int)num; i++) p4n_elem_swap(F, ids[i], ids[i + (int)num], unions);
        i = size - (int)num;
    }
    for (int j = i; j < size; j++) p4n_elem_invalidate(F, ids[j], unions);
}

#endif
