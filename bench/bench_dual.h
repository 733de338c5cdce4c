/* chainrules-bench's dual_* figures (bench_dual.c): the inline forward mode. */
#ifndef CR_BENCH_DUAL_H
#define CR_BENCH_DUAL_H

/* Prints the dual_* figures named in argv (all without arguments); 0 on success. */
int bench_dual(int argc, char **argv);

#endif
