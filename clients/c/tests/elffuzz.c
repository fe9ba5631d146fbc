/*
 * elffuzz.c — a mutation fuzzer for the library's ELF symbol-table reader,
 * built with AddressSanitizer and UndefinedBehaviorSanitizer:
 *
 *   elffuzz SEED-ELF ITERATIONS [RANDOM-SEED]
 *
 * Each iteration copies the seed file, overwrites a few bytes (mostly in
 * the ELF header, the section headers and the symbol tables, where the
 * reader looks), writes it to a temporary file and resolves a few offsets
 * in it. A crash or a sanitizer report fails the run; otherwise it prints
 * "elffuzz: N files, S with symbols".
 */
#include "internal.h"

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: elffuzz SEED-ELF ITERATIONS [RANDOM-SEED]\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (f == NULL) {
		perror(argv[1]);
		return 2;
	}
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *seed = malloc((size_t)size), *buf = malloc((size_t)size);
	if (seed == NULL || buf == NULL || fread(seed, 1, (size_t)size, f) != (size_t)size) {
		fprintf(stderr, "cannot read %s\n", argv[1]);
		return 2;
	}
	fclose(f);
	long iterations = atol(argv[2]);
	rng = argc > 3 ? strtoull(argv[3], NULL, 10) : 88172645463325252ull;
	if (rng == 0)
		rng = 1;

	/* The regions worth mutating: the ELF header, the section headers
	 * and the sections the reader uses. */
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)seed;
	struct {
		size_t off, len;
	} regions[8];
	int nreg = 0;
	regions[nreg].off = 0;
	regions[nreg++].len = sizeof(ElfW(Ehdr));
	if (eh->e_shoff > 0 && eh->e_shoff < (size_t)size) {
		regions[nreg].off = eh->e_shoff;
		regions[nreg++].len = (size_t)size - eh->e_shoff;
		const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(seed + eh->e_shoff);
		for (unsigned i = 0; i < eh->e_shnum && nreg < 8; i++) {
			if ((sh[i].sh_type == SHT_SYMTAB || sh[i].sh_type == SHT_DYNSYM || sh[i].sh_type == SHT_STRTAB) &&
			    sh[i].sh_offset < (size_t)size && sh[i].sh_size > 0 && sh[i].sh_size <= (size_t)size - sh[i].sh_offset) {
				regions[nreg].off = sh[i].sh_offset;
				regions[nreg++].len = sh[i].sh_size;
			}
		}
	}

	char path[] = "/tmp/elffuzz-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return 2;
	}
	close(fd);
	long with_symbols = 0;
	for (long it = 0; it < iterations; it++) {
		memcpy(buf, seed, (size_t)size);
		long keep = size;
		int edits = 1 + (int)(next() % 8);
		for (int e = 0; e < edits; e++) {
			int r = (int)(next() % (uint64_t)nreg);
			size_t at = regions[r].off + next() % regions[r].len;
			switch (next() % 4) {
			case 0:
				buf[at] = (uint8_t)next();
				break;
			case 1:
				buf[at] ^= (uint8_t)(1u << (next() % 8));
				break;
			case 2: /* an extreme 32-bit value */
				if (at + 4 <= (size_t)size) {
					uint32_t v = (next() & 1) ? 0xffffffffu : 0x7fffffffu;
					memcpy(buf + at, &v, 4);
				}
				break;
			default: /* a truncated file */
				if (next() % 16 == 0)
					keep = (long)(next() % (uint64_t)size);
				break;
			}
		}
		f = fopen(path, "wb");
		if (f == NULL || fwrite(buf, 1, (size_t)keep, f) != (size_t)keep || fclose(f) != 0) {
			perror(path);
			return 2;
		}
		char name[256];
		for (int k = 0; k < 4; k++) {
			int rc = tb_elf_lookup(path, (uintptr_t)(next() % ((uint64_t)size + 64)), name, sizeof name);
			if (k == 0 && rc >= 0)
				with_symbols++;
		}
	}
	unlink(path);
	free(seed);
	free(buf);
	printf("elffuzz: %ld files, %ld with symbols\n", iterations, with_symbols);
	return 0;
}
