/*
 * chainrules-bench-ops: fixed work for instruction counts (valgrind --tool=callgrind), not a
 * timer. REPS recordings of a chain of N tanh operations, then the gradient of the last
 * with respect to the input. The mode says how each operation is recorded:
 *
 *   named   cr_tanh(t, y)                          (tape_ops.h)
 *   call    cr_tape_call1(t, &cr_fn_tanh, &y, 1)   (the generic entry point)
 *   none    nothing: the fixed cost of the program (start-up, tape, context)
 *
 * Built twice: chainrules-bench-ops links the library as users do (the shared library by
 * default) and chainrules-bench-ops-static links the static archive, so that the two
 * counts compare the cost of calls into the shared library. BENCHMARKS.md has the figures.
 * Usage: chainrules-bench-ops named|call|none [REPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>

enum { N = 1000 };

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "named") != 0 && strcmp(argv[1], "call") != 0 &&
                     strcmp(argv[1], "none") != 0)) {
        fputs("usage: chainrules-bench-ops named|call|none [REPS]\n", stderr);
        return 2;
    }
    int named = strcmp(argv[1], "named") == 0;
    long reps = strcmp(argv[1], "none") == 0 ? 0 : argc > 2 ? strtol(argv[2], NULL, 10) : 200;
    cr_ctx *ctx;
    cr_tape *t;
    if (cr_ctx_new(NULL, &ctx) != CR_OK)
        return 1;
    if (cr_tape_new(ctx, NULL, &t) != CR_OK) {
        cr_ctx_free(ctx);
        return 1;
    }
    double acc = 0.0, g;
    int rc = 0;
    for (long r = 0; r < reps && rc == 0; r++) {
        cr_tape_reset(t);
        cr_var x = cr_tape_input(t, 0.5), y = x;
        for (int i = 0; i < N; i++)
            y = named ? cr_tanh(t, y) : cr_tape_call1(t, &cr_fn_tanh, &y, 1);
        if (cr_tape_gradient(t, y, &x, 1, &g) != CR_OK) {
            fprintf(stderr, "chainrules-bench-ops: %s\n", cr_tape_errmsg(t));
            rc = 1;
        }
        acc += g;
    }
    printf("%s: %ld x %d operations, sum of gradients %.17g\n", argv[1], reps, N, acc);
    cr_tape_free(t);
    cr_ctx_free(ctx);
    return rc;
}
