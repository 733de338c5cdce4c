/* chainrules-bench's tape_gmm_* and tape_lstm_* figures (bench_tape.c): GradBench's gmm and
 * lstm on the reverse tape, recorded at each call or prepared once. */
#ifndef CR_BENCH_TAPE_H
#define CR_BENCH_TAPE_H

/* Prints the figures named in argv (all without arguments); 0 on success. */
int bench_tape(int argc, char **argv);

#endif
