/*
 * unit.c — unit tests of the library's internal parts: the Kieker frame
 * encoding (byte for byte), UTF-8 cutting, the string table and its limit,
 * the ring, trace ids, symbol resolution and name splitting, exclusion
 * patterns. The end-to-end tests against a real bridge are in c_test.go.
 *
 * The library reads its configuration in a constructor, so the test runs
 * itself again with the limits it needs in the environment.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			failures++;                                        \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);    \
			fprintf(stderr, __VA_ARGS__);                      \
			fputc('\n', stderr);                               \
		}                                                          \
	} while (0)

static int same(const uint8_t *got, size_t n, const uint8_t *want, size_t m)
{
	if (n != m || memcmp(got, want, n) != 0) {
		fprintf(stderr, "  got  ");
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, "%02x", got[i]);
		fprintf(stderr, "\n  want ");
		for (size_t i = 0; i < m; i++)
			fprintf(stderr, "%02x", want[i]);
		fputc('\n', stderr);
		return 0;
	}
	return 1;
}

static void test_put(void)
{
	uint8_t b[12];
	uint8_t *e = tb_put64(tb_put32(b, 0x01020304u), 0x1122334455667788ull);
	static const uint8_t want[] = { 1, 2, 3, 4, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88 };
	CHECK(same(b, (size_t)(e - b), want, sizeof want), "put32/put64 not big-endian");
}

static void test_frames(void)
{
	uint8_t b[128];
	int32_t ids[3] = { 5, 6, 7 };
	struct tb_rec before = { .kind = TB_KIND_BEFORE, .order = 3, .time = 0x0102030405060708, .trace = -2, .lts = -1 };
	uint8_t *e = tb_append_frame(b, &before, 1, ids);
	static const uint8_t wb[] = {
		0, 0, 0, 1,                                     /* class id */
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* logging timestamp -1 */
		1, 2, 3, 4, 5, 6, 7, 8,                         /* timestamp */
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, /* traceId -2 */
		0, 0, 0, 3,                                     /* orderIndex */
		0, 0, 0, 5, 0, 0, 0, 6,                         /* op, cls */
	};
	CHECK(same(b, (size_t)(e - b), wb, sizeof wb), "BeforeOperationEvent frame");
	CHECK(tb_frame_size(TB_KIND_BEFORE) == sizeof wb, "before size %zu", tb_frame_size(TB_KIND_BEFORE));

	struct tb_rec failed = before;
	failed.kind = TB_KIND_FAILED;
	e = tb_append_frame(b, &failed, 9, ids);
	CHECK((size_t)(e - b) == sizeof wb + 4 && e[-1] == 7 && b[3] == 9, "AfterOperationFailedEvent frame");
	CHECK(tb_frame_size(TB_KIND_FAILED) == sizeof wb + 4, "failed size");

	struct tb_rec meta = { .kind = TB_KIND_META, .order = -1, .time = 77, .trace = 0x42, .lts = 1000, .parent = 0x42 };
	e = tb_append_frame(b, &meta, 0, ids);
	static const uint8_t wm[] = {
		0, 0, 0, 0,                   /* class id */
		0, 0, 0, 0, 0, 0, 0x03, 0xe8, /* logging timestamp 1000 */
		0, 0, 0, 0, 0, 0, 0, 0x42,    /* traceId */
		0, 0, 0, 0, 0, 0, 0, 77,      /* threadId */
		0, 0, 0, 5, 0, 0, 0, 6,       /* sessionId, hostname */
		0, 0, 0, 0, 0, 0, 0, 0x42,    /* parentTraceId */
		0xff, 0xff, 0xff, 0xff,       /* parentOrderId -1 */
	};
	CHECK(same(b, (size_t)(e - b), wm, sizeof wm), "TraceMetadata frame");
	CHECK(tb_frame_size(TB_KIND_META) == sizeof wm, "meta size");

	struct tb_rec split = { .kind = TB_KIND_SPLIT, .order = 4, .time = 0x0102030405060708, .trace = 0x42, .lts = -1 };
	e = tb_append_frame(b, &split, 3, ids);
	static const uint8_t ws[] = {
		0, 0, 0, 3,                                     /* class id */
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* logging timestamp -1 */
		1, 2, 3, 4, 5, 6, 7, 8,                         /* timestamp */
		0, 0, 0, 0, 0, 0, 0, 0x42,                      /* traceId */
		0, 0, 0, 4,                                     /* orderIndex */
	};
	CHECK(same(b, (size_t)(e - b), ws, sizeof ws), "SplitEvent frame");
	CHECK(tb_frame_size(TB_KIND_SPLIT) == sizeof ws, "split size");
	struct tb_rec join = split;
	join.kind = TB_KIND_JOIN;
	join.parent = 0x0a0b0c0d0e0f1011;
	e = tb_append_frame(b, &join, 3, ids);
	static const uint8_t wj[] = { 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11 }; /* joinedTraceId */
	CHECK((size_t)(e - b) == sizeof ws + 8 && !memcmp(b + 4 + 8, ws + 4 + 8, sizeof ws - 12) &&
	              same(b + sizeof ws, 8, wj, sizeof wj),
	      "JoinEvent frame");
	CHECK(tb_frame_size(TB_KIND_JOIN) == sizeof ws + 8, "join size");

	tb_pid = 0x01020304;
	struct tb_rec inv = { .kind = TB_KIND_INV, .flags = 0, .order = 5, .time = 0x1000, .trace = 0x42, .lts = 9,
	                      .parent = 8, .s3 = 77, .aux = 4321 };
	e = tb_append_frame(b, &inv, 2, ids);
	static const uint8_t wi[] = {
		0, 0, 0, 2,                                     /* class id */
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* logging timestamp -1 */
		0, 0, 0, 0, 0, 0, 0, 9,                         /* invocationId */
		1, 2, 3, 4,                                     /* processId */
		0, 0, 0, 5,                                     /* nodeId */
		0, 0, 0, 0, 0, 0, 0x10, 0xe1,                   /* runnableId 4321 */
		0, 0, 0, 0, 0, 0, 0x10, 0,                      /* creationTime */
		0, 0, 0, 0, 0, 0, 0, 8,                         /* parentInvocationId */
		0, 0, 0, 77,                                    /* parentProcessId */
		0, 0, 0, 6,                                     /* parentNodeId */
		0, 0, 0, 5,                                     /* parentOrderId */
		0, 0, 0, 0, 0, 0, 0, 0x42,                      /* traceId */
	};
	CHECK(same(b, (size_t)(e - b), wi, sizeof wi), "InvocationRecord frame");
	CHECK(tb_frame_size(TB_KIND_INV) == sizeof wi, "invocation size");
	inv.flags = TB_REC_LTS;
	tb_append_frame(b, &inv, 2, ids);
	CHECK(b[10] == 0x10 && b[11] == 0, "InvocationRecord logging timestamp = creation time");
	tb_str_t ihs[4];
	CHECK(tb_rec_strings(&inv, ihs) == 3 && ihs[0] == TB_STR_INVOCATION, "InvocationRecord strings");
	tb_pid = (int32_t)getpid();

	e = tb_append_entry(b, 2, "ab", 2);
	static const uint8_t we[] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 2, 0, 0, 0, 2, 'a', 'b' };
	CHECK(same(b, (size_t)(e - b), we, sizeof we), "registry entry");

	tb_str_t hs[4];
	failed.s1 = 10;
	failed.s2 = 11;
	failed.s3 = 12;
	CHECK(tb_rec_strings(&failed, hs) == 4 && hs[0] == TB_STR_AFTER_FAILED && hs[3] == 12, "failed strings");
	meta.s1 = 20;
	meta.s2 = 21;
	CHECK(tb_rec_strings(&meta, hs) == 3 && hs[0] == TB_STR_TRACE_META && hs[2] == 21, "meta strings");
	CHECK(tb_rec_strings(&split, hs) == 1 && hs[0] == TB_STR_SPLIT, "split strings");
	CHECK(tb_rec_strings(&join, hs) == 1 && hs[0] == TB_STR_JOIN, "join strings");
	CHECK(!strcmp(tb_string(TB_STR_JOIN)->bytes, "kieker.common.record.flow.trace.concurrency.JoinEvent"), "join class");
}

static void test_header(void)
{
	char buf[TB_INVOCATION_HEADER_MAX];
	struct {
		const char *node;
		int32_t pid;
		int64_t inv;
		int32_t order;
		const char *want;
	} cases[] = {
		{ "web-1", 4242, 7, 3, "tb1-web%2D1-4242-7-3" },
		{ "a%b", 1, 1, 0, "tb1-a%25b-1-1-0" },
		{ "host.example.org", INT32_MAX, INT64_MAX, INT32_MAX,
		  "tb1-host.example.org-2147483647-9223372036854775807-2147483647" },
		{ "n\xc3\xb6" "de x", 0, 1, 0, "tb1-n%C3%B6de%20x-0-1-0" },
		{ "", 5, 6, 7, "tb1--5-6-7" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t n = tb_format_header(buf, sizeof buf, cases[i].node, strlen(cases[i].node), cases[i].pid,
		                            cases[i].inv, cases[i].order);
		CHECK(n == strlen(cases[i].want) && !strcmp(buf, cases[i].want), "header %s, want %s", buf, cases[i].want);
		struct tb_header h;
		CHECK(tb_parse_header(buf, &h) && !strcmp(h.node, cases[i].node) && h.node_len == strlen(cases[i].node) &&
		          h.pid == cases[i].pid && h.inv == cases[i].inv && h.order == cases[i].order,
		      "parse %s", buf);
	}
	CHECK(tb_format_header(buf, 10, "web", 3, 1, 2, 3) == 0 && buf[0] == 0, "too small a buffer");
	char big[TB_HEADER_NODE_MAX + 2];
	memset(big, '-', sizeof big);
	CHECK(tb_format_header(buf, sizeof buf, big, TB_HEADER_NODE_MAX, INT32_MAX, INT64_MAX, INT32_MAX) ==
	          4 + 3 * TB_HEADER_NODE_MAX + 1 + 10 + 1 + 19 + 1 + 10,
	      "the longest header fits TB_INVOCATION_HEADER_MAX");
	CHECK(tb_format_header(buf, sizeof buf, big, TB_HEADER_NODE_MAX + 1, 1, 1, 1) == 0, "node too long");
	struct tb_header h;
	CHECK(tb_parse_header("tb1-%61%2db-1-2-3", &h) && !strcmp(h.node, "a-b"), "lower-case escapes");
	static const char *bad[] = {
		"", "tb1", "tb1-", "tb2-a-1-2-3", "tb1-a-1-2", "tb1-a-1-2-3-4", "tb1-a-1-2-", "tb1-a--2-3",
		"tb1-a-+1-2-3", "tb1-a-1-2-x", "tb1-a-2147483648-1-1", "tb1-a-1-9223372036854775808-1",
		"tb1-a-1-1-2147483648", "tb1-%-1-2-3", "tb1-%4-1-2-3", "tb1-%zz-1-2-3", "TB1-a-1-2-3",
		"tb1-a-1-2-99999999999999999999",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(!tb_parse_header(bad[i], &h), "%s parsed", bad[i]);
	CHECK(!tb_parse_header(NULL, &h), "NULL parsed");
	char longnode[TB_INVOCATION_HEADER_MAX];
	snprintf(longnode, sizeof longnode, "tb1-%.*s-1-2-3", TB_HEADER_NODE_MAX + 1, big);
	memset(longnode + 4, 'x', TB_HEADER_NODE_MAX + 1);
	CHECK(!tb_parse_header(longnode, &h), "node of %d bytes parsed", TB_HEADER_NODE_MAX + 1);
	snprintf(longnode, sizeof longnode, "tb1-%.*s-1-2-3", TB_HEADER_NODE_MAX, big);
	memset(longnode + 4, 'x', TB_HEADER_NODE_MAX);
	CHECK(tb_parse_header(longnode, &h) && h.node_len == TB_HEADER_NODE_MAX, "node of %d bytes", TB_HEADER_NODE_MAX);

	/* Mutations of a header: what parses formats back to a header that
	 * parses to the same. */
	static const char alphabet[] = "tb1-%2D0123456789aAfFzZ\x80 ";
	unsigned seed = 12345;
	for (int i = 0; i < 100000; i++) {
		char in[64];
		snprintf(in, sizeof in, "tb1-n%%2Dx-%d-%d-%d", i, i * 7, i % 13);
		size_t len = strlen(in);
		for (int k = 0; k < 3; k++) {
			seed = seed * 1103515245u + 12345u;
			size_t at = (seed >> 8) % (len + 1);
			char c = alphabet[(seed >> 20) % (sizeof alphabet - 1)];
			if (at < len && (seed & 1))
				in[at] = c;
			else if (at < len)
				memmove(in + at, in + at + 1, len-- - at);
		}
		in[len] = '\0';
		struct tb_header a, b2;
		if (!tb_parse_header(in, &a))
			continue;
		char again[TB_INVOCATION_HEADER_MAX];
		CHECK(tb_format_header(again, sizeof again, a.node, a.node_len, a.pid, a.inv, a.order) > 0 &&
		          tb_parse_header(again, &b2) && b2.node_len == a.node_len && !memcmp(a.node, b2.node, a.node_len) &&
		          a.pid == b2.pid && a.inv == b2.inv && a.order == b2.order,
		      "%s: round trip through %s", in, again);
	}
}

static void test_utf8(void)
{
	const char *s = "h\xc3\xa9llo"; /* h é l l o */
	CHECK(tb_utf8_cut(s, 6, 10) == 6, "no cut");
	CHECK(tb_utf8_cut(s, 6, 2) == 1, "cut inside é keeps h only: %zu", tb_utf8_cut(s, 6, 2));
	CHECK(tb_utf8_cut(s, 6, 3) == 3, "cut after é");
	CHECK(tb_utf8_cut(s, 6, 0) == 0, "cut to nothing");
	const char *euro = "\xe2\x82\xac\xe2\x82\xac"; /* €€ */
	CHECK(tb_utf8_cut(euro, 6, 5) == 3, "three-byte sequences");
}

/* Runs with TRACEBRIDGE_MAX_STRINGS=64, TRACEBRIDGE_MAX_STRING_LEN=32. */
static void test_strtab(void)
{
	CHECK(tb_intern(NULL) == TB_STR_EMPTY, "NULL is the empty string");
	CHECK(!strcmp(tb_string(TB_STR_BEFORE)->bytes, "kieker.common.record.flow.trace.operation.BeforeOperationEvent"),
	      "fixed strings are not cut");
	tb_str_t a = tb_intern("alpha"), b = tb_intern("beta");
	char copy[] = "alpha";
	CHECK(a != b && tb_intern(copy) == a, "interning by content");
	CHECK(tb_string(a)->len == 5 && !strcmp(tb_string(a)->bytes, "alpha"), "stored bytes");
	tb_str_t l = tb_intern("0123456789012345678901234567890123456789");
	CHECK(tb_string(l)->len == 32, "long string cut to 32: %u", tb_string(l)->len);
	CHECK(tb_intern("01234567890123456789012345678901-other-tail") == l, "cut strings share a handle");
	uint64_t before = atomic_load(&tb_count.string_overflow);
	char name[32];
	tb_str_t last = 0;
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof name, "s%d", i);
		last = tb_intern(name);
	}
	CHECK(last == TB_STR_OVERFLOW, "full table gives the overflow string");
	CHECK(atomic_load(&tb_count.string_overflow) > before, "overflow counted");
	CHECK(tb_strtab_len() == tb_strtab_capacity(), "table filled to capacity %u/%u", tb_strtab_len(), tb_strtab_capacity());
	CHECK(tb_intern("alpha") == a, "old strings still found when full");
}

/* Runs with TRACEBRIDGE_BUFFER=1024 and the writer off. */
static void test_ring(void)
{
	struct tb_rec r = { .kind = TB_KIND_BEFORE };
	int pushed = 0;
	for (int i = 0; i < 2000; i++) {
		r.order = i;
		if (tb_ring_push(&r) == 0)
			pushed++;
	}
	CHECK(pushed == 1024, "ring holds 1024, took %d", pushed);
	struct tb_rec out;
	int popped = 0, inorder = 1;
	while (tb_ring_pop(&out)) {
		if (out.order != popped)
			inorder = 0;
		popped++;
	}
	CHECK(popped == 1024 && inorder, "popped %d in order %d", popped, inorder);
	CHECK(tb_ring_push(&r) == 0, "room again after popping");
	CHECK(tb_ring_pop(&out) && !tb_ring_pop(&out), "one record");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void test_ids(void)
{
	enum { N = 1 << 20 };
	uint64_t *v = malloc(N * sizeof *v);
	uint64_t base = (1ull << 63) - 1000; /* crosses the wrap-around */
	for (uint64_t i = 0; i < N; i++)
		v[i] = tb_mix63(base + i);
	qsort(v, N, sizeof *v, cmp_u64);
	int dup = 0, big = 0;
	for (int i = 0; i < N; i++) {
		if (i > 0 && v[i] == v[i - 1])
			dup++;
		if (v[i] >> 63)
			big++;
	}
	CHECK(dup == 0 && big == 0, "trace ids: %d duplicates, %d negative", dup, big);
	free(v);
}

static void test_cxx_split(void)
{
	struct {
		const char *in, *scope, *name;
	} cases[] = {
		{ "geo::Square::area() const", "geo::Square", "geo::Square::area" },
		{ "geo::Square::Square(double)", "geo::Square", "geo::Square::Square" },
		{ "int geo::twice<int>(int)", "geo", "geo::twice<int>" },
		{ "risky(int)", "", "risky" },
		{ "main", "", "main" },
		{ "std::vector<int, std::allocator<int> >::push_back(int const&)", "std::vector<int, std::allocator<int> >",
		  "std::vector<int, std::allocator<int> >::push_back" },
		{ "Foo::operator()(int) const", "Foo", "Foo::operator()" },
		{ "operator<<(std::ostream&, Foo const&)", "", "operator<<" },
		{ "(anonymous namespace)::helper(int)", "(anonymous namespace)", "(anonymous namespace)::helper" },
		{ "a::b()::{lambda(int)#1}::operator()(int) const", "a::b()::{lambda(int)#1}", "a::b()::{lambda(int)#1}::operator()" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t ns, ne;
		size_t scope = tb_cxx_split(cases[i].in, &ns, &ne);
		char gs[256], gn[256];
		snprintf(gs, sizeof gs, "%.*s", (int)scope, cases[i].in + ns);
		snprintf(gn, sizeof gn, "%.*s", (int)(ne - ns), cases[i].in + ns);
		CHECK(!strcmp(gs, cases[i].scope) && !strcmp(gn, cases[i].name), "split %s: scope %s name %s", cases[i].in,
		      gs, gn);
	}
}

static void test_fortran_split(void)
{
	size_t ms, ml, ps;
	CHECK(tb_fortran_split("__shapes_MOD_fact", &ms, &ml, &ps) && ml == 6 && !strncmp("__shapes_MOD_fact" + ms, "shapes", ml) &&
	          !strcmp("__shapes_MOD_fact" + ps, "fact"),
	      "module procedure");
	CHECK(tb_fortran_split("__my_mod_MOD_x", &ms, &ml, &ps) && ml == 6, "module name with _");
	CHECK(!tb_fortran_split("walk_", &ms, &ml, &ps), "external procedure");
	CHECK(!tb_fortran_split("___MOD_x", &ms, &ml, &ps) || ml > 0, "empty module");
	CHECK(!tb_fortran_split("__m_MOD_", &ms, &ml, &ps), "empty procedure");
}

static void test_excluded(void)
{
	CHECK(tb_excluded("main,foo*", "main"), "exact");
	CHECK(tb_excluded("main, foo*", "foobar"), "glob after a space");
	CHECK(!tb_excluded("main,foo*", "barfoo"), "no match");
	CHECK(!tb_excluded("", "main"), "empty list");
	CHECK(tb_excluded(",,geo::Square::*,", "geo::Square::area"), "C++ scope");
	CHECK(!tb_excluded("mai", "main"), "patterns match whole names");
}

/* Functions for the symbol tests; noinline so they have addresses. */
__attribute__((noinline)) static int static_helper(int x)
{
	return x * 3;
}
__attribute__((noinline)) int excluded_fn_one(int x)
{
	return x + 1;
}

static void test_symbols(void)
{
	volatile int sink = static_helper(1) + excluded_fn_one(1);
	(void)sink;
	uint64_t v = tb_symbol((void *)static_helper);
	CHECK(v != TB_SYM_EXCLUDED, "static_helper excluded");
	const char *op = tb_string((tb_str_t)(v >> 32))->bytes, *cls = tb_string((tb_str_t)v)->bytes;
	CHECK(!strcmp(op, "static_helper"), "static function from .symtab: %s", op);
	CHECK(!strcmp(cls, "unit"), "class is the executable: %s", cls);
	CHECK(tb_symbol((void *)static_helper) == v, "cached");
	CHECK(tb_symbol((void *)excluded_fn_one) == TB_SYM_EXCLUDED, "TRACEBRIDGE_EXCLUDE");

	v = tb_symbol((void *)qsort);
	op = tb_string((tb_str_t)(v >> 32))->bytes;
	cls = tb_string((tb_str_t)v)->bytes;
	CHECK(strstr(op, "qsort") != NULL && !strncmp(cls, "libc", 4), "libc function: %s in %s", op, cls);

	v = tb_symbol((void *)0x10);
	op = tb_string((tb_str_t)(v >> 32))->bytes;
	cls = tb_string((tb_str_t)v)->bytes;
	CHECK(!strcmp(op, "0x10") && !strcmp(cls, "<unknown>"), "unmapped address: %s %s", op, cls);
}

int main(int argc, char **argv)
{
	(void)argc;
	if (getenv("TB_UNIT_CHILD") == NULL) {
		setenv("TB_UNIT_CHILD", "1", 1);
		setenv("TRACEBRIDGE_ENABLED", "0", 1);
		setenv("TRACEBRIDGE_BUFFER", "1024", 1);
		setenv("TRACEBRIDGE_MAX_STRINGS", "64", 1);
		setenv("TRACEBRIDGE_MAX_STRING_LEN", "32", 1);
		setenv("TRACEBRIDGE_EXCLUDE", "excluded_fn_*", 1);
		unsetenv("TRACEBRIDGE_QUIET");
		execv("/proc/self/exe", argv);
		perror("execv");
		return 1;
	}
	test_put();
	test_frames();
	test_header();
	test_utf8();
	test_ring();
	test_ids();
	test_cxx_split();
	test_fortran_split();
	test_excluded();
	test_symbols(); /* before test_strtab fills the table */
	test_strtab();
	if (failures) {
		fprintf(stderr, "unit: %d failures\n", failures);
		return 1;
	}
	printf("unit: ok\n");
	return 0;
}
