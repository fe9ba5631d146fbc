/*
 * ring.c — the bounded ring between probes and the writer thread: Dmitry
 * Vyukov's bounded MPMC queue used with one consumer. A slot's sequence
 * number says whether it is free for position p (seq == p) or holds the
 * record of position p (seq == p + 1). Producers claim a position with one
 * compare-and-swap and never wait: a full ring is reported at once.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct tb_ring tb_ring;

int tb_ring_init(uint32_t size)
{
	struct tb_slot *s = aligned_alloc(64, (size_t)size * sizeof *s);
	if (s == NULL)
		return -1;
	memset(s, 0, (size_t)size * sizeof *s);
	tb_ring.slots = s;
	tb_ring.mask = size - 1;
	tb_ring_reset();
	return 0;
}

void tb_ring_reset(void)
{
	for (uint64_t i = 0; i <= tb_ring.mask; i++)
		atomic_store_explicit(&tb_ring.slots[i].seq, i, memory_order_relaxed);
	atomic_store_explicit(&tb_ring.head, 0, memory_order_relaxed);
	atomic_store_explicit(&tb_ring.tail, 0, memory_order_release);
}

int tb_ring_pop(struct tb_rec *out)
{
	struct tb_ring *q = &tb_ring;
	uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
	struct tb_slot *s = &q->slots[pos & q->mask];
	if (atomic_load_explicit(&s->seq, memory_order_acquire) != pos + 1)
		return 0;
	*out = s->rec;
	atomic_store_explicit(&s->seq, pos + q->mask + 1, memory_order_release);
	atomic_store_explicit(&q->tail, pos + 1, memory_order_release);
	return 1;
}
