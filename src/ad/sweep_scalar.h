/*
 * The first-order sweep's scalar loop, included twice by node_scalar.c (a template): with
 * SWEEP_NAME the function's name and SWEEP_CONSUME 0 or 1.
 *
 * Sweep back from p over the records of a first-order tape (no words in front of the
 * payloads) while they are of the kinds scalar code records (INPUT, UNARY, BINARY, ADD,
 * SUB, COPY, NEG); i is the variable the record at p makes, plus one. Returns where it
 * stopped: base, or the end of a record of another kind, for the general loop. Constant
 * record sizes and nothing else per record (no top test, no leading words, no other
 * kinds): Rosenbrock's scalar loop is bound by instructions per record and by memory.
 *
 * SWEEP_CONSUME 1: each record's adjoint is set back to zero once read (the record
 * consumes it), so that after the sweep only the adjoints of the inputs are not zero; the
 * first INPUT record met (the highest) sets *in_hi to the end of its variables, when it is
 * still 0. The tape's kept workspace (sweep.c, kept_ws) stays clean this way, with no
 * clearing pass before the next sweep.
 */
// clang-format off
static NOINLINE const cr__word *SWEEP_NAME(const cr__word *p, const cr__word *base, double *adj,
                                           size_t *pi, size_t *in_hi)
{
    double *ai = adj + *pi; /* the adjoint after the one of the record at p */
    uint64_t h;
    double g;
#if SWEEP_CONSUME
#define TAKE(g) ((g) = *--ai, *ai = 0.0)
#else
#define TAKE(g) ((g) = *--ai)
    (void)in_hi;
#endif
    /* STEP(K) opens the step of kind K; NEXT ends a step: on to the next record, or out.
     * The threaded form does not test p against base: p == base reads the chunk's stop
     * header (cr__chunk.stop, kind K_STOP), whose step is out, as are those of the kinds
     * the general loop sweeps. base must be the chunk's first word. */
#if SWEEP_THREADED
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic" /* labels as values and goto * */
#define STEP(K) s_##K:
#define NEXT                     \
    do {                         \
        h = p[-1].u;             \
        goto *step[hdr_kind(h)]; \
    } while (0)
    static const void *const step[16] = {
        [K_INPUT] = &&s_K_INPUT, [K_UNARY] = &&s_K_UNARY, [K_BINARY] = &&s_K_BINARY,
        [K_ADD] = &&s_K_ADD,     [K_SUB] = &&s_K_SUB,     [K_COPY] = &&s_K_COPY,
        [K_NEG] = &&s_K_NEG,     [7] = &&out,             [8] = &&out,
        [9] = &&out,             [10] = &&out,            [11] = &&out,
        [12] = &&out,            [13] = &&out,            [14] = &&out,
        [K_STOP] = &&out};
    (void)base;
    NEXT;
    {
#else
#define STEP(K) case K:
#define NEXT    continue
    while (p > base) {
        h = p[-1].u;
        switch (hdr_kind(h)) {
#endif
    STEP(K_UNARY)
        TAKE(g);
        adj[hdr_a(h)] += p[-2].d * g;
        p -= 2;
        NEXT;
    STEP(K_ADD)
        TAKE(g);
        adj[hdr_a(h)] += g;
        adj[hdr_b(h)] += g;
        p -= 1;
        NEXT;
    STEP(K_SUB)
        TAKE(g);
        adj[hdr_a(h)] += g;
        adj[hdr_b(h)] -= g;
        p -= 1;
        NEXT;
    STEP(K_BINARY)
        TAKE(g);
        adj[hdr_a(h)] += p[-3].d * g;
        adj[hdr_b(h)] += p[-2].d * g;
        p -= 3;
        NEXT;
    STEP(K_COPY)
        TAKE(g);
        adj[hdr_a(h)] += g;
        p -= 1;
        NEXT;
    STEP(K_NEG)
        TAKE(g);
        adj[hdr_a(h)] -= g;
        p -= 1;
        NEXT;
    STEP(K_INPUT)
#if SWEEP_CONSUME
        if (*in_hi == 0)
            *in_hi = (size_t)(ai - adj);
#endif
        ai -= hdr_a(h);
        p -= 1;
        NEXT;
#if SWEEP_THREADED
    }
#pragma GCC diagnostic pop
#else
        default:
            goto out;
        }
    }
#endif
#undef STEP
#undef NEXT
#undef TAKE
out:
    *pi = (size_t)(ai - adj);
    return p;
}
// clang-format on
