/*
 * strtab.c — the process-wide string table. Probes intern operation and
 * class signatures here and put only 32-bit handles into the ring; the
 * writer maps handles to per-connection registry ids.
 *
 * Lookups are lock-free (open addressing; a slot, once published with a
 * release store, never changes); inserts take one mutex. The table has a
 * fixed capacity (TRACEBRIDGE_MAX_STRINGS): when it is full, new strings
 * become "<too many strings>" and are counted.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static struct tb_string **strs;   /* handle → string */
static _Atomic uint32_t *slots;   /* hash slot → handle + 1, 0 = empty */
static uint32_t slot_mask;
static uint32_t cap;              /* maximum number of strings */
static _Atomic uint32_t count;
static uint32_t max_len;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static uint32_t hash(const char *s, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
		s += 8;
		n -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, s, n);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 29;
	return (uint32_t)h;
}

size_t tb_utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	size_t n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

int tb_strtab_init(uint32_t max_strings, uint32_t max)
{
	cap = max_strings + TB_STR_FIXED_COUNT;
	max_len = UINT32_MAX; /* the fixed strings are never cut */
	uint32_t size = 1;
	while (size < 2 * cap)
		size <<= 1;
	strs = calloc(cap, sizeof *strs);
	slots = calloc(size, sizeof *slots);
	if (strs == NULL || slots == NULL) {
		free(strs);
		free((void *)slots);
		strs = NULL;
		slots = NULL;
		return -1;
	}
	slot_mask = size - 1;
	static const char *fixed[TB_STR_FIXED_COUNT] = {
		[TB_STR_EMPTY] = "",
		[TB_STR_OVERFLOW] = "<too many strings>",
		[TB_STR_TRACE_META] = "kieker.common.record.flow.trace.TraceMetadata",
		[TB_STR_BEFORE] = "kieker.common.record.flow.trace.operation.BeforeOperationEvent",
		[TB_STR_AFTER] = "kieker.common.record.flow.trace.operation.AfterOperationEvent",
		[TB_STR_AFTER_FAILED] = "kieker.common.record.flow.trace.operation.AfterOperationFailedEvent",
		[TB_STR_SPLIT] = "kieker.common.record.flow.trace.concurrency.SplitEvent",
		[TB_STR_JOIN] = "kieker.common.record.flow.trace.concurrency.JoinEvent",
		[TB_STR_INVOCATION] = "tracebridge.trace.InvocationRecord",
	};
	for (tb_str_t i = 0; i < TB_STR_FIXED_COUNT; i++) {
		if (tb_intern(fixed[i]) != i)
			return -1;
	}
	max_len = max;
	return 0;
}

tb_str_t tb_intern(const char *s)
{
	if (s == NULL)
		return TB_STR_EMPTY;
	return tb_intern_n(s, strlen(s));
}

/* find returns the handle of (s, len, h) or, when absent, UINT32_MAX and
 * the empty slot where it belongs. */
static uint32_t find(const char *s, size_t len, uint32_t h, uint32_t *slot)
{
	uint32_t i = h & slot_mask;
	for (;;) {
		uint32_t v = atomic_load_explicit(&slots[i], memory_order_acquire);
		if (v == 0) {
			*slot = i;
			return UINT32_MAX;
		}
		const struct tb_string *e = strs[v - 1];
		if (e->hash == h && e->len == len && memcmp(e->bytes, s, len) == 0)
			return v - 1;
		i = (i + 1) & slot_mask;
	}
}

tb_str_t tb_intern_n(const char *s, size_t len)
{
	if (TB_UNLIKELY(slots == NULL))
		return TB_STR_EMPTY;
	len = tb_utf8_cut(s, len, max_len);
	uint32_t h = hash(s, len);
	uint32_t slot;
	uint32_t found = find(s, len, h, &slot);
	if (TB_LIKELY(found != UINT32_MAX))
		return found;

	pthread_mutex_lock(&mu);
	found = find(s, len, h, &slot);
	if (found != UINT32_MAX) {
		pthread_mutex_unlock(&mu);
		return found;
	}
	uint32_t n = atomic_load_explicit(&count, memory_order_relaxed);
	struct tb_string *e = NULL;
	if (n < cap)
		e = malloc(sizeof *e + len + 1);
	if (e == NULL) {
		pthread_mutex_unlock(&mu);
		tb_inc(&tb_count.string_overflow, 1);
		return TB_STR_OVERFLOW;
	}
	e->hash = h;
	e->len = (uint32_t)len;
	memcpy(e->bytes, s, len);
	e->bytes[len] = '\0';
	strs[n] = e;
	atomic_store_explicit(&count, n + 1, memory_order_release);
	atomic_store_explicit(&slots[slot], n + 1, memory_order_release);
	pthread_mutex_unlock(&mu);
	return n;
}

const struct tb_string *tb_string(tb_str_t h)
{
	return strs[h];
}

uint32_t tb_strtab_capacity(void)
{
	return cap;
}

uint32_t tb_strtab_len(void)
{
	return atomic_load_explicit(&count, memory_order_acquire);
}

void tb_strtab_atfork_prepare(void)
{
	pthread_mutex_lock(&mu);
}

void tb_strtab_atfork_parent(void)
{
	pthread_mutex_unlock(&mu);
}

void tb_strtab_atfork_child(void)
{
	pthread_mutex_init(&mu, NULL);
}
