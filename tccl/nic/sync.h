/* What a device's NIC thread and the library's thread share (nic.h's nic_sync): one
 * lock over the device's state -- its ports, QPs, completion queue -- and two eventfds,
 * one that wakes the NIC thread (a post, a new QP, stop) and one that wakes the library
 * (completions, a QP it does not know, a failure). The NIC thread holds the lock except
 * while it sleeps; the library takes it inside each C call it makes, never across
 * Python code (which could wait for the GIL meanwhile). A queue without a device has
 * no sync: every helper here is then a no-op. Not part of the cffi declarations. */
#ifndef NIC_SYNC_H
#define NIC_SYNC_H

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

struct nic_sync {
    pthread_mutex_t lock;
    pthread_t thread;
    int running, stop;
    int kick_fd, notify_fd;
    int notified;           /* notify_fd written, the queue not drained since */
    int error;              /* errno of the thread's failed wait */
    double quantum;
};

static inline void nic_sync_lock(nic_sync *s)
{
    if (s != NULL)
        pthread_mutex_lock(&s->lock);
}

static inline void nic_sync_unlock(nic_sync *s)
{
    if (s != NULL)
        pthread_mutex_unlock(&s->lock);
}

static inline void nic_sync_signal(int fd)
{
    uint64_t one = 1;
    (void)!write(fd, &one, sizeof one);     /* a full counter is already readable */
}

/* Wakes the NIC thread, if one runs (after the caller let go of the lock; without a
 * thread the count waits, read at its first wake-up). */
static inline void nic_sync_kick(nic_sync *s)
{
    if (s != NULL)
        nic_sync_signal(s->kick_fd);
}

#endif
