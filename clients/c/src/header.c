/*
 * header.c — invocation headers, the identifier of a call that travels
 * with a request to another process (tb_invocation_header,
 * tb_trace_start_remote):
 *
 *   tb1-NODE-PID-INVOCATION-ORDER
 *
 * fields separated by '-': the version "tb1"; the node (hostname) with
 * '%', '-' and every byte outside printable ASCII ('!'..'~') written %XX
 * (upper-case hex digits; any %XX is decoded); the process id, the
 * invocation id and the next orderIndex of the invocation, as unsigned
 * decimal numbers (int32, int64, int32); 811 bytes at most. The Go and
 * Python clients write and read the same format. Pure functions: no
 * state, no allocation.
 */
#include "internal.h"

#include <string.h>

#define TB_HEADER_LEN_MAX (4 + 3 * TB_HEADER_NODE_MAX + 1 + 10 + 1 + 19 + 1 + 10)

static const char hexdig[] = "0123456789ABCDEF";

static char *put_num(char *p, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

size_t tb_format_header(char *buf, size_t n, const char *node, size_t node_len, int32_t pid, int64_t inv,
                        int32_t order)
{
	/* "tb1-" + node escaped (at most 3 bytes each) + "-" + 10 digits + "-"
	 * + 19 digits + "-" + 10 digits + NUL */
	char tmp[4 + 3 * TB_HEADER_NODE_MAX + 1 + 10 + 1 + 19 + 1 + 10 + 1];
	if (buf == NULL || n == 0)
		return 0;
	buf[0] = '\0';
	if (node_len > TB_HEADER_NODE_MAX || pid < 0 || inv < 0 || order < 0)
		return 0;
	char *p = tmp;
	memcpy(p, "tb1-", 4);
	p += 4;
	for (size_t i = 0; i < node_len; i++) {
		unsigned char c = (unsigned char)node[i];
		if (c == '-' || c == '%' || c <= ' ' || c > '~') {
			*p++ = '%';
			*p++ = hexdig[c >> 4];
			*p++ = hexdig[c & 15];
		} else {
			*p++ = (char)c;
		}
	}
	*p++ = '-';
	p = put_num(p, (uint64_t)pid);
	*p++ = '-';
	p = put_num(p, (uint64_t)inv);
	*p++ = '-';
	p = put_num(p, (uint64_t)order);
	size_t len = (size_t)(p - tmp);
	if (len + 1 > n)
		return 0;
	memcpy(buf, tmp, len);
	buf[len] = '\0';
	return len;
}

static int unhex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* num parses the digits of [s, e) as a number at most max. */
static int num(const char *s, const char *e, uint64_t max, uint64_t *out)
{
	if (s == e || e - s > 19)
		return 0;
	uint64_t v = 0;
	for (; s < e; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		v = v * 10 + (uint64_t)(*s - '0'); /* 19 digits fit in 64 bits */
	}
	if (v > max)
		return 0;
	*out = v;
	return 1;
}

int tb_parse_header(const char *s, struct tb_header *h)
{
	/* The longest header: a node of escapes, numbers of 10, 19 and 10 digits. */
	if (s == NULL || strncmp(s, "tb1-", 4) != 0 || strnlen(s, TB_HEADER_LEN_MAX + 1) > TB_HEADER_LEN_MAX)
		return 0;
	s += 4;
	const char *f[4], *end[4];
	for (int i = 0; i < 4; i++) {
		f[i] = s;
		const char *d = i < 3 ? strchr(s, '-') : s + strlen(s);
		if (d == NULL)
			return 0;
		end[i] = d;
		s = i < 3 ? d + 1 : d;
	}
	size_t n = 0;
	for (const char *p = f[0]; p < end[0]; p++) {
		if (n == TB_HEADER_NODE_MAX)
			return 0;
		if (*p != '%') {
			h->node[n++] = *p;
			continue;
		}
		if (end[0] - p < 3)
			return 0;
		int hi = unhex(p[1]), lo = unhex(p[2]);
		if (hi < 0 || lo < 0)
			return 0;
		h->node[n++] = (char)(hi << 4 | lo);
		p += 2;
	}
	h->node[n] = '\0';
	h->node_len = n;
	uint64_t pid, inv, order;
	if (!num(f[1], end[1], INT32_MAX, &pid) || !num(f[2], end[2], INT64_MAX, &inv) ||
	    !num(f[3], end[3], INT32_MAX, &order))
		return 0;
	h->pid = (int32_t)pid;
	h->inv = (int64_t)inv;
	h->order = (int32_t)order;
	return 1;
}
