/*
 * config.c — the library's configuration, read once from the environment.
 * Invalid values fall back to the default with a note on stderr.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tb_config tb_cfg;

void tb_note(const char *fmt, ...)
{
	if (tb_cfg.quiet)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	/* One write(2): no stdio lock, no interleaving with other lines. */
	ssize_t w = write(STDERR_FILENO, "tracebridge: ", 13);
	if (w >= 0)
		w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}

/* env returns the first of the variables that is set and not empty. */
static const char *env(const char *name, const char *alt)
{
	const char *v = getenv(name);
	if ((v == NULL || *v == '\0') && alt != NULL)
		v = getenv(alt);
	if (v != NULL && *v == '\0')
		v = NULL;
	return v;
}

static void copy(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* number parses a decimal integer in [lo, hi]; otherwise def, with a note. */
static long number(const char *name, long def, long lo, long hi)
{
	const char *v = env(name, NULL);
	if (v == NULL)
		return def;
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0') {
		tb_note("ignoring %s=%s: not a number; using %ld", name, v, def);
		return def;
	}
	if (n < lo || n > hi) {
		tb_note("ignoring %s=%s: outside [%ld, %ld]; using %ld", name, v, lo, hi, def);
		return def;
	}
	return n;
}

static int flag(const char *name, int def)
{
	const char *v = env(name, NULL);
	if (v == NULL)
		return def;
	if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
		return 1;
	if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
		return 0;
	tb_note("ignoring %s=%s: not a boolean; using %d", name, v, def);
	return def;
}

static uint32_t pow2(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

void tb_config_load(void)
{
	struct tb_config *c = &tb_cfg;
	memset(c, 0, sizeof *c);
	c->quiet = flag("TRACEBRIDGE_QUIET", 0);

	const char *v = env("TRACEBRIDGE_HOST", "KIEKER_HOSTNAME");
	copy(c->host, sizeof c->host, v ? v : "127.0.0.1");
	long port = number(env("TRACEBRIDGE_PORT", NULL) ? "TRACEBRIDGE_PORT" : "KIEKER_PORT", 10133, 1, 65535);
	snprintf(c->port, sizeof c->port, "%ld", port);

	c->enabled = flag("TRACEBRIDGE_ENABLED", 1);
	c->ring_size = pow2((uint32_t)number("TRACEBRIDGE_BUFFER", TB_RING_DEFAULT, TB_RING_MIN, TB_RING_MAX));
	c->flush_ms = (int)number("TRACEBRIDGE_FLUSH_MS", 10, 1, 10000);
	c->connect_timeout_ms = (int)number("TRACEBRIDGE_CONNECT_TIMEOUT_MS", 1000, 1, 60000);
	c->reconnect_min_ms = (int)number("TRACEBRIDGE_RECONNECT_MIN_MS", 100, 1, 600000);
	c->reconnect_max_ms = (int)number("TRACEBRIDGE_RECONNECT_MAX_MS", 5000, 1, 3600000);
	if (c->reconnect_max_ms < c->reconnect_min_ms)
		c->reconnect_max_ms = c->reconnect_min_ms;
	c->exit_timeout_ms = (int)number("TRACEBRIDGE_EXIT_TIMEOUT_MS", 1000, 0, 600000);
	c->max_strings = (uint32_t)number("TRACEBRIDGE_MAX_STRINGS", TB_STRINGS_DEFAULT, TB_STRINGS_MIN, TB_STRINGS_MAX);
	c->max_string_len = (uint32_t)number("TRACEBRIDGE_MAX_STRING_LEN", TB_STRING_LEN_DEFAULT, TB_STRING_LEN_MIN, TB_STRING_LEN_MAX);
	c->logging_timestamp = flag("TRACEBRIDGE_LOGGING_TIMESTAMP", 0);
	c->invocations = flag("TRACEBRIDGE_INVOCATIONS", 1);

	v = env("TRACEBRIDGE_HOSTNAME", NULL);
	if (v != NULL) {
		copy(c->hostname, sizeof c->hostname, v);
	} else if (gethostname(c->hostname, sizeof c->hostname - 1) != 0) {
		copy(c->hostname, sizeof c->hostname, "<default-host>");
	}
	c->hostname[sizeof c->hostname - 1] = '\0';
	v = env("TRACEBRIDGE_SESSION", NULL);
	copy(c->session, sizeof c->session, v ? v : "<no-session-id>");
	v = env("TRACEBRIDGE_EXCLUDE", NULL);
	copy(c->exclude, sizeof c->exclude, v ? v : "");
}
