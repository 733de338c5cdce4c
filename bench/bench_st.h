/* chainrules-bench's st_* figures (bench_st.c): derivatives written by chainrules-ad. */
#ifndef CR_BENCH_ST_H
#define CR_BENCH_ST_H

/* Prints the st_* figures named in argv (all without arguments); 0 on success. */
int bench_st(int argc, char **argv);

#endif
