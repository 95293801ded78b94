/* Completions: what the NIC tells the library, polled (verbs' completion queue). A
 * received message's bytes belong to the queue until it is cleared. */
#include <stdlib.h>
#include <string.h>

#include "nic.h"
#include "sync.h"

void nic_cq_push(nic_cq *cq, int kind, uint64_t user, uint64_t wr_id, uint8_t *data, size_t len)
{
    if (cq->n == cq->cap) {
        size_t cap = cq->cap ? 2 * cq->cap : 64;
        nic_completion *e = realloc(cq->e, cap * sizeof *e);
        if (e == NULL) {
            cq->oom = 1;
            free(data);
            return;
        }
        cq->e = e;
        cq->cap = cap;
    }
    cq->e[cq->n++] = (nic_completion){kind, user, wr_id, data, len};
}

void nic_cq_clear(nic_cq *cq)
{
    for (size_t i = 0; i < cq->n; i++)
        free(cq->e[i].data);
    cq->n = 0;
}

void nic_cq_free(nic_cq *cq)
{
    nic_cq_clear(cq);
    free(cq->e);
    cq->e = NULL;
    cq->cap = 0;
}

void nic_cq_drain(nic_cq *cq, nic_cq *into)
{
    nic_cq_clear(into);
    nic_sync_lock(cq->sync);
    nic_completion *e = into->e;
    size_t cap = into->cap;
    into->e = cq->e;
    into->cap = cq->cap;
    into->n = cq->n;
    into->oom = cq->oom;
    cq->e = e;              /* the library's emptied array, reused */
    cq->cap = cap;
    cq->n = 0;
    cq->oom = 0;
    if (cq->sync != NULL)
        cq->sync->notified = 0;
    nic_sync_unlock(cq->sync);
}

void nic_cq_read(nic_cq *cq, void *dst, const void *src, size_t len)
{
    nic_sync_lock(cq->sync);
    memcpy(dst, src, len);
    nic_sync_unlock(cq->sync);
}
