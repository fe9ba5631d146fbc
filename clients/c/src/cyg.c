/*
 * cyg.c — the hooks gcc calls at the entry and exit of every function
 * compiled with -finstrument-functions (C, C++, Fortran, …). They are never
 * instrumented themselves, and the library is built without the flag; in
 * case it is not, the thread's busy flag stops any recursion.
 *
 * Excluded functions (TRACEBRIDGE_EXCLUDE) are skipped at entry and exit
 * alike, so traces stay balanced.
 */
#include "internal.h"

TB_API void __cyg_profile_func_enter(void *fn, void *site) TB_NOINSTR;
TB_API void __cyg_profile_func_exit(void *fn, void *site) TB_NOINSTR;

static inline void hook(void *fn, int leave) TB_NOINSTR;

/* hook records that the function fn is entered or, with leave, left. */
static inline void hook(void *fn, int leave)
{
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return;
	uint64_t v = tb_symbol(fn);
	if (v != TB_SYM_EXCLUDED) {
		if (leave)
			tb_emit_after(t, (tb_str_t)(v >> 32), (tb_str_t)v, 0, 0);
		else
			tb_emit_before(t, (tb_str_t)(v >> 32), (tb_str_t)v);
	}
	tb_leave_probe(t);
}

void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)site;
	hook(fn, 0);
}

void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)site;
	hook(fn, 1);
}
