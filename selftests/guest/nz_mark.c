// SPDX-License-Identifier: GPL-2.0
/*
 * nz_mark: execute the marker instruction that the instruction-counting
 * TCG plugin (tools/qemu/nz_insns.c, vm.sh -P) watches for: at each one it
 * writes the counts since the previous marker and starts again.  Outside
 * such a guest the instruction does nothing ("xchg %bx,%bx").
 */
#include <stdio.h>

int main(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("xchg %%bx, %%bx" : : : "memory");
	return 0;
#else
	fprintf(stderr, "nz_mark: x86 only\n");
	return 1;
#endif
}
