/*
 * symbols.c — from a code address (gcc's -finstrument-functions hands the
 * hooks the function's entry address) to an operation and a class
 * signature, cached per address.
 *
 * Resolution, once per function:
 *   1. dl_iterate_phdr finds the loaded module (executable or shared
 *      object) whose PT_LOAD segment holds the address, and its load bias
 *      (non-zero for PIE executables and shared objects).
 *   2. The module's ELF file (/proc/self/exe for the executable) is mapped
 *      read-only and its .symtab (else .dynsym) function symbols are sorted
 *      once; address - bias is looked up by binary search. This finds
 *      static functions and functions of executables without dynamic
 *      symbols, which dladdr cannot.
 *   3. Else dladdr (exact matches only).
 *   4. Else the operation is the hexadecimal offset in the module.
 * C++ names ("_Z…") are demangled with __cxa_demangle when the process has
 * it (found with dlsym; otherwise they stay mangled). gfortran module
 * procedures "__mod_MOD_proc" become "mod::proc".
 *
 * Class signature: the scope of a C++ name ("geo::Circle" for
 * "geo::Circle::area() const"), the module of a Fortran module procedure,
 * else the file name of the module the function lives in ("auto",
 * "libfoo.so.1").
 *
 * TRACEBRIDGE_EXCLUDE holds comma-separated fnmatch(3) patterns; a function
 * is excluded when one matches its raw symbol, its displayed name or that
 * name without the parameter list (e.g. main,helper_*,geo::Circle::*).
 *
 * Locks: the address cache is read without locks (a slot's key is
 * published after its value); inserts take cache_mu. Module tables are
 * built under mod_mu. Neither lock is held while calling into the dynamic
 * loader (dl_iterate_phdr, dladdr, dlsym), so a constructor of a library
 * being loaded may run instrumented code without deadlocking.
 */
#include "internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the address cache ---- */

struct centry {
	_Atomic uintptr_t key;
	_Atomic uint64_t val;
};

static struct centry *cache;
static uint32_t cache_mask;
static uint32_t cache_used;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static uint32_t hash_ptr(uintptr_t p)
{
	uint64_t x = (uint64_t)p;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x;
}

int tb_symbols_init(void)
{
	uint32_t size = 1u << 16;
	while (size < 2 * tb_cfg.max_strings && size < (1u << 22))
		size <<= 1;
	cache = calloc(size, sizeof *cache);
	if (cache == NULL)
		return -1;
	cache_mask = size - 1;
	return 0;
}

static void cache_put(uintptr_t key, uint64_t val)
{
	pthread_mutex_lock(&cache_mu);
	if ((uint64_t)cache_used * 4 < (uint64_t)(cache_mask + 1) * 3) {
		uint32_t i = hash_ptr(key) & cache_mask;
		for (;;) {
			uintptr_t k = atomic_load_explicit(&cache[i].key, memory_order_relaxed);
			if (k == key)
				break;
			if (k == 0) {
				atomic_store_explicit(&cache[i].val, val, memory_order_relaxed);
				atomic_store_explicit(&cache[i].key, key, memory_order_release);
				cache_used++;
				break;
			}
			i = (i + 1) & cache_mask;
		}
	}
	pthread_mutex_unlock(&cache_mu);
}

/* ---- modules and their ELF symbol tables ---- */

struct fsym {
	uintptr_t value;
	uintptr_t size;
	uint32_t name;
	uint8_t rank; /* 0 global, 1 weak, 2 local: lower is preferred */
};

struct module {
	char path[PATH_MAX];
	uintptr_t bias;
	int state; /* 0 not loaded, 1 symbols, -1 no symbols */
	struct fsym *syms;
	size_t nsyms;
	const char *strtab;
	size_t strsz;
	const void *map; /* the mapped file, kept while symbols are in use */
	size_t maplen;
	char base[256];
};

enum { MAX_MODULES = 512 };
static struct module *mods;
static int nmods;
static pthread_mutex_t mod_mu = PTHREAD_MUTEX_INITIALIZER;

struct where {
	uintptr_t addr;
	int found;
	uintptr_t bias;
	char path[PATH_MAX];
};

/* scopy copies src into dst[cap], cut if longer. */
static void scopy(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct where *w = data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (w->addr >= lo && w->addr - lo < ph->p_memsz) {
			w->found = 1;
			w->bias = info->dlpi_addr;
			scopy(w->path, sizeof w->path, info->dlpi_name ? info->dlpi_name : "");
			return 1;
		}
	}
	return 0;
}

static int cmp_fsym(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	return (int)x->rank - (int)y->rank;
}

static void set_base(struct module *m)
{
	const char *p = m->path;
	char exe[PATH_MAX];
	if (p[0] == '\0') {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (n > 0) {
			exe[n] = '\0';
			p = exe;
		} else {
			p = "<executable>";
		}
	}
	const char *slash = strrchr(p, '/');
	scopy(m->base, sizeof m->base, slash ? slash + 1 : p);
}

/* load_symbols maps the module's file and collects its function symbols.
 * Every offset and size read from the file is checked against its size. */
static void load_symbols(struct module *m)
{
	m->state = -1;
	const char *path = m->path[0] ? m->path : "/proc/self/exe";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
		close(fd);
		return;
	}
	size_t size = (size_t)st.st_size;
	const uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return;
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)map;
	const ElfW(Shdr) *sh = NULL;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
	    eh->e_shentsize != sizeof(ElfW(Shdr)) || eh->e_shnum == 0 || eh->e_shoff >= size ||
	    eh->e_shoff % _Alignof(ElfW(Shdr)) != 0 ||
	    (size - eh->e_shoff) / sizeof(ElfW(Shdr)) < eh->e_shnum)
		goto fail;
	sh = (const ElfW(Shdr) *)(map + eh->e_shoff);
	const ElfW(Shdr) *symsec = NULL;
	for (int pass = 0; pass < 2 && symsec == NULL; pass++) {
		uint32_t want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
		for (unsigned i = 0; i < eh->e_shnum; i++) {
			if (sh[i].sh_type == want) {
				symsec = &sh[i];
				break;
			}
		}
	}
	if (symsec == NULL || symsec->sh_entsize != sizeof(ElfW(Sym)) || symsec->sh_link >= eh->e_shnum ||
	    symsec->sh_offset % _Alignof(ElfW(Sym)) != 0 ||
	    symsec->sh_offset > size || symsec->sh_size > size - symsec->sh_offset)
		goto fail;
	const ElfW(Shdr) *strsec = &sh[symsec->sh_link];
	if (strsec->sh_type != SHT_STRTAB || strsec->sh_offset > size || strsec->sh_size > size - strsec->sh_offset ||
	    strsec->sh_size == 0)
		goto fail;
	const ElfW(Sym) *syms = (const ElfW(Sym) *)(map + symsec->sh_offset);
	size_t n = symsec->sh_size / sizeof(ElfW(Sym));
	const char *strtab = (const char *)(map + strsec->sh_offset);
	size_t strsz = strsec->sh_size;
	struct fsym *out = malloc((n ? n : 1) * sizeof *out);
	if (out == NULL)
		goto fail;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const ElfW(Sym) *s = &syms[i];
		int type = ELF64_ST_TYPE(s->st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s->st_shndx == SHN_UNDEF || s->st_value == 0 ||
		    s->st_name == 0 || s->st_name >= strsz || memchr(strtab + s->st_name, 0, strsz - s->st_name) == NULL)
			continue;
		int bind = ELF64_ST_BIND(s->st_info);
		out[k].value = (uintptr_t)s->st_value;
		out[k].size = (uintptr_t)s->st_size;
		out[k].name = s->st_name;
		out[k].rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
		k++;
	}
	if (k == 0) {
		free(out);
		goto fail;
	}
	qsort(out, k, sizeof *out, cmp_fsym);
	m->syms = out;
	m->nsyms = k;
	m->strtab = strtab;
	m->strsz = strsz;
	m->state = 1;
	m->map = map;
	m->maplen = size;
	return; /* the mapping stays for the life of the process */
fail:
	munmap((void *)map, size);
}

/* module_symbol looks off up in m; returns a malloc'ed copy of the name. */
static char *module_symbol(struct module *m, uintptr_t off)
{
	size_t lo = 0, hi = m->nsyms;
	while (lo < hi) { /* first symbol with value >= off */
		size_t mid = lo + (hi - lo) / 2;
		if (m->syms[mid].value < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct fsym *f = NULL;
	if (lo < m->nsyms && m->syms[lo].value == off) {
		f = &m->syms[lo];
	} else if (lo > 0) {
		const struct fsym *p = &m->syms[lo - 1];
		/* the first symbol of p's address group, best rank */
		size_t j = lo - 1;
		while (j > 0 && m->syms[j - 1].value == p->value)
			j--;
		p = &m->syms[j];
		if (off - p->value < p->size)
			f = p;
	}
	return f ? strdup(m->strtab + f->name) : NULL;
}

/* find_symbol resolves addr through the module tables: the symbol name
 * (malloc'ed, or NULL), the module's file name and the offset. */
static char *find_symbol(uintptr_t addr, const struct where *w, char *base, size_t basecap, uintptr_t *off)
{
	char *name = NULL;
	*off = addr - w->bias;
	pthread_mutex_lock(&mod_mu);
	struct module *m = NULL;
	for (int i = 0; i < nmods; i++) {
		if (mods[i].bias == w->bias && strcmp(mods[i].path, w->path) == 0) {
			m = &mods[i];
			break;
		}
	}
	if (m == NULL && nmods < MAX_MODULES) {
		if (mods == NULL)
			mods = calloc(MAX_MODULES, sizeof *mods);
		if (mods != NULL) {
			m = &mods[nmods++];
			memset(m, 0, sizeof *m);
			scopy(m->path, sizeof m->path, w->path);
			m->bias = w->bias;
			set_base(m);
		}
	}
	if (m != NULL) {
		if (m->state == 0)
			load_symbols(m);
		if (m->state == 1)
			name = module_symbol(m, *off);
		scopy(base, basecap, m->base);
	} else {
		const char *slash = strrchr(w->path, '/');
		scopy(base, basecap, slash ? slash + 1 : w->path);
	}
	pthread_mutex_unlock(&mod_mu);
	return name;
}

/* tb_elf_lookup loads the function symbols of the ELF file at path (as
 * module resolution does), looks up off and releases everything: the
 * entry point of the ELF fuzz test. Returns the name's length copied to
 * out, 0 when not found, -1 when the file has no usable symbols. */
int tb_elf_lookup(const char *path, uintptr_t off, char *out, size_t cap)
{
	struct module *m = calloc(1, sizeof *m);
	if (m == NULL)
		return -1;
	scopy(m->path, sizeof m->path, path);
	load_symbols(m);
	int rc = -1;
	if (m->state == 1) {
		char *name = module_symbol(m, off);
		rc = 0;
		if (name != NULL) {
			scopy(out, cap, name);
			rc = (int)strlen(out);
			free(name);
		}
		free(m->syms);
		munmap((void *)m->map, m->maplen);
	}
	free(m);
	return rc;
}

/* ---- names ---- */

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static _Atomic(demangle_fn) demangler;
static _Atomic int demangler_looked;

static demangle_fn get_demangler(void)
{
	if (!atomic_load_explicit(&demangler_looked, memory_order_acquire)) {
		demangle_fn f;
		void *p = dlsym(RTLD_DEFAULT, "__cxa_demangle");
		memcpy(&f, &p, sizeof f);
		atomic_store_explicit(&demangler, f, memory_order_relaxed);
		atomic_store_explicit(&demangler_looked, 1, memory_order_release);
	}
	return atomic_load_explicit(&demangler, memory_order_relaxed);
}

size_t tb_cxx_split(const char *name, size_t *name_start, size_t *name_end)
{
	size_t n = strlen(name);
	size_t start = 0, end = n, scope_end = 0;
	int depth = 0;
	static const char anon[] = "(anonymous namespace)";
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (depth == 0 && strncmp(name + i, anon, sizeof anon - 1) == 0) {
			i += sizeof anon - 2;
			continue;
		}
		if (strncmp(name + i, "operator", 8) == 0 && (i == 0 || name[i - 1] == ':' || name[i - 1] == ' ')) {
			i += 8;
			if (name[i] == '(' && name[i + 1] == ')')
				i += 2;
			while (i < n && name[i] != '(')
				i++;
			if (depth == 0) {
				end = i;
				break;
			}
			i--;
			continue;
		}
		switch (c) {
		case '<':
		case '[':
		case '{':
			depth++;
			break;
		case '(':
			if (depth == 0) {
				/* "f(int)::local" names a scope inside a function:
				 * go on past the parameter list. */
				size_t j = i + 1;
				int pd = 1;
				while (j < n && pd > 0) {
					if (name[j] == '(')
						pd++;
					else if (name[j] == ')')
						pd--;
					j++;
				}
				if (pd == 0 && name[j] == ':' && name[j + 1] == ':') {
					i = j - 1;
					continue;
				}
				end = i;
				i = n;
				continue;
			}
			depth++;
			break;
		case '>':
		case ']':
		case '}':
		case ')':
			if (depth > 0)
				depth--;
			break;
		case ' ':
			if (depth == 0)
				start = i + 1;
			break;
		case ':':
			if (depth == 0 && name[i + 1] == ':') {
				scope_end = i;
				i++;
			}
			break;
		}
	}
	*name_start = start;
	*name_end = end;
	return scope_end > start ? scope_end - start : 0;
}

int tb_fortran_split(const char *sym, size_t *mod_start, size_t *mod_len, size_t *proc_start)
{
	if (strncmp(sym, "__", 2) != 0)
		return 0;
	const char *mod = strstr(sym + 2, "_MOD_");
	if (mod == NULL || mod == sym + 2 || mod[5] == '\0')
		return 0;
	*mod_start = 2;
	*mod_len = (size_t)(mod - (sym + 2));
	*proc_start = (size_t)(mod + 5 - sym);
	return 1;
}

int tb_excluded(const char *patterns, const char *name)
{
	char pat[1024];
	const char *p = patterns;
	while (*p) {
		while (*p == ',' || *p == ' ')
			p++;
		size_t n = strcspn(p, ",");
		size_t m = n;
		while (m > 0 && p[m - 1] == ' ')
			m--;
		if (m > 0 && m < sizeof pat) {
			memcpy(pat, p, m);
			pat[m] = '\0';
			if (fnmatch(pat, name, 0) == 0)
				return 1;
		}
		p += n;
	}
	return 0;
}

static int excluded_any(const char *a, const char *b, size_t blen)
{
	if (tb_cfg.exclude[0] == '\0')
		return 0;
	if (a && tb_excluded(tb_cfg.exclude, a))
		return 1;
	if (b) {
		char tmp[4096];
		if (blen >= sizeof tmp)
			blen = sizeof tmp - 1;
		memcpy(tmp, b, blen);
		tmp[blen] = '\0';
		if (tb_excluded(tb_cfg.exclude, tmp))
			return 1;
	}
	return 0;
}

static uint64_t pack(tb_str_t op, tb_str_t cls)
{
	return ((uint64_t)op << 32) | cls;
}

/* describe turns a symbol into (op, cls) handles, or TB_SYM_EXCLUDED. */
static uint64_t describe(const char *sym, const char *base)
{
	demangle_fn dm = NULL;
	char *dem = NULL;
	if (sym[0] == '_' && sym[1] == 'Z' && (dm = get_demangler()) != NULL) {
		int status = -1;
		dem = dm(sym, NULL, NULL, &status);
		if (status != 0) {
			free(dem);
			dem = NULL;
		}
	}
	uint64_t v;
	if (dem != NULL) {
		size_t ns, ne;
		size_t scope = tb_cxx_split(dem, &ns, &ne);
		if (excluded_any(sym, dem, strlen(dem)) || excluded_any(NULL, dem + ns, ne - ns))
			v = TB_SYM_EXCLUDED;
		else
			v = pack(tb_intern(dem), scope ? tb_intern_n(dem + ns, scope) : tb_intern(base));
		free(dem);
		return v;
	}
	size_t ms, ml, ps;
	if (tb_fortran_split(sym, &ms, &ml, &ps)) {
		char name[1024];
		int n = snprintf(name, sizeof name, "%.*s::%s", (int)ml, sym + ms, sym + ps);
		if (n < 0 || (size_t)n >= sizeof name)
			n = (int)sizeof name - 1;
		if (excluded_any(sym, name, (size_t)n) || excluded_any(NULL, sym + ps, strlen(sym + ps)))
			return TB_SYM_EXCLUDED;
		return pack(tb_intern_n(name, (size_t)n), tb_intern_n(sym + ms, ml));
	}
	if (excluded_any(sym, NULL, 0))
		return TB_SYM_EXCLUDED;
	return pack(tb_intern(sym), tb_intern(base));
}

static uint64_t resolve(void *fn)
{
	uintptr_t addr = (uintptr_t)fn;
	struct where w;
	memset(&w, 0, sizeof w);
	w.addr = addr;
	dl_iterate_phdr(phdr_cb, &w);
	char base[256] = "<unknown>";
	uintptr_t off = addr;
	char *sym = NULL;
	if (w.found)
		sym = find_symbol(addr, &w, base, sizeof base, &off);
	if (sym == NULL) {
		Dl_info info;
		if (dladdr(fn, &info) != 0 && info.dli_sname != NULL && info.dli_saddr == fn)
			sym = strdup(info.dli_sname);
		if (!w.found && dladdr(fn, &info) != 0 && info.dli_fname != NULL) {
			const char *slash = strrchr(info.dli_fname, '/');
			scopy(base, sizeof base, slash ? slash + 1 : info.dli_fname);
			if (info.dli_fbase != NULL)
				off = addr - (uintptr_t)info.dli_fbase;
		}
	}
	uint64_t v;
	if (sym != NULL) {
		v = describe(sym, base);
		free(sym);
	} else {
		char hex[32];
		snprintf(hex, sizeof hex, "0x%lx", (unsigned long)off);
		v = excluded_any(hex, NULL, 0) ? TB_SYM_EXCLUDED : pack(tb_intern(hex), tb_intern(base));
	}
	return v;
}

uint64_t tb_symbol(void *fn)
{
	uintptr_t key = (uintptr_t)fn;
	if (TB_UNLIKELY(cache == NULL || key == 0))
		return pack(TB_STR_EMPTY, TB_STR_EMPTY);
	uint32_t i = hash_ptr(key) & cache_mask;
	for (;;) {
		uintptr_t k = atomic_load_explicit(&cache[i].key, memory_order_acquire);
		if (k == key)
			return atomic_load_explicit(&cache[i].val, memory_order_relaxed);
		if (k == 0)
			break;
		i = (i + 1) & cache_mask;
	}
	uint64_t v = resolve(fn);
	cache_put(key, v);
	return v;
}

void tb_symbols_atfork_prepare(void)
{
	pthread_mutex_lock(&mod_mu);
	pthread_mutex_lock(&cache_mu);
}

void tb_symbols_atfork_parent(void)
{
	pthread_mutex_unlock(&cache_mu);
	pthread_mutex_unlock(&mod_mu);
}

void tb_symbols_atfork_child(void)
{
	pthread_mutex_init(&cache_mu, NULL);
	pthread_mutex_init(&mod_mu, NULL);
}
