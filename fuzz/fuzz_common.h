/*
 * What the libFuzzer harnesses of fuzz/ share (docs/fuzzing.md):
 *
 *  - a capped allocation hook for their contexts: one allocation above FUZZ_ALLOC_MAX or
 *    a total above FUZZ_LIVE_MAX is refused (the library then reports CR_ENOMEM, a handled
 *    path), so that an input asking for a legitimately huge array costs a status, not the
 *    fuzzer's memory limit (which would be a false crash);
 *  - a reader of the fuzzer's bytes (bounded integers, doubles drawn from a table of
 *    interesting values or taken raw), which gives zeros once the input is used up.
 */
#ifndef CR_FUZZ_COMMON_H
#define CR_FUZZ_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>

/* libFuzzer's entry points (no header declares them). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* ---- Capped allocation hook ---------------------------------------------------------- */

#define FUZZ_ALLOC_MAX ((size_t)16 << 20) /* one allocation: 16 MiB */
#define FUZZ_LIVE_MAX  ((size_t)64 << 20) /* all live allocations of a context: 64 MiB */

typedef struct fuzz_alloc {
    size_t live; /* bytes allocated through the hook and not freed */
} fuzz_alloc;

static void *fuzz_realloc(void *env, void *ptr, size_t old_size, size_t new_size)
{
    fuzz_alloc *a = env;
    if (new_size == 0) {
        free(ptr);
        a->live -= old_size;
        return NULL;
    }
    if (new_size > FUZZ_ALLOC_MAX || new_size - old_size > FUZZ_LIVE_MAX - a->live)
        return NULL;
    void *p = realloc(ptr, new_size);
    if (p != NULL)
        a->live += new_size - old_size;
    return p;
}

/* A context whose allocations go through fuzz_realloc with env a; NULL when out of memory. */
static inline cr_ctx *fuzz_ctx_new(fuzz_alloc *a)
{
    cr_ctx_params p = {.struct_size = sizeof p, .realloc_fn = fuzz_realloc, .alloc_env = a};
    cr_ctx *ctx = NULL;
    if (cr_ctx_new(&p, &ctx) != CR_OK)
        return NULL;
    return ctx;
}

/* OpenBLAS starts its threads when it is loaded; one thread keeps a harness on one core. */
extern void openblas_set_num_threads(int n) __attribute__((weak));

static inline void fuzz_one_thread(void)
{
    if (openblas_set_num_threads != NULL)
        openblas_set_num_threads(1);
}

/* ---- Reading the input ---------------------------------------------------------------- */

typedef struct fuzz_in {
    const uint8_t *p;
    size_t n;
} fuzz_in;

static inline bool fuzz_more(const fuzz_in *in)
{
    return in->n > 0;
}

static inline uint8_t fuzz_u8(fuzz_in *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint64_t fuzz_u64(fuzz_in *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | fuzz_u8(in);
    return v;
}

/* An integer in [0, n) (n >= 1), from one byte (two when n > 256). */
static inline size_t fuzz_below(fuzz_in *in, size_t n)
{
    size_t v = fuzz_u8(in);
    if (n > 256)
        v = v << 8 | fuzz_u8(in);
    return v % n;
}

static inline bool fuzz_bool(fuzz_in *in)
{
    return fuzz_u8(in) & 1u;
}

/* A double: mostly an ordinary value (small integers and halves, which keep most functions
 * in their domains), sometimes an edge (0, -0, inf, nan, subnormal, huge), sometimes the
 * raw bits of the next 8 bytes. */
static inline double fuzz_double(fuzz_in *in)
{
    static const double edges[] = {0.0,
                                   -0.0,
                                   1.0,
                                   -1.0,
                                   0.5,
                                   2.0,
                                   HUGE_VAL,
                                   -HUGE_VAL,
                                   0.0 / 0.0,
                                   5e-324,
                                   1e-300,
                                   1e300,
                                   1.7976931348623157e308,
                                   0.1,
                                   -2.5,
                                   3.141592653589793,
                                   1e-8,
                                   1e8,
                                   -1e-8,
                                   100.0};
    uint8_t c = fuzz_u8(in);
    if (c < 160)
        return (double)((int)c - 80) / 16.0;
    if (c < 240)
        return edges[(size_t)(c - 160) % (sizeof edges / sizeof edges[0])];
    uint64_t u = fuzz_u64(in);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* A finite double (directions and seeds, which the API requires finite). */
static inline double fuzz_finite(fuzz_in *in)
{
    double d = fuzz_double(in);
    return isfinite(d) ? d : 1.0;
}

/* An integer argument: mostly small (dims, indices, counts, orders), sometimes an extreme
 * (the edges of int64 and of the sizes whose byte counts wrap). */
static inline int64_t fuzz_int(fuzz_in *in)
{
    static const int64_t edges[] = {INT64_MIN,
                                    INT64_MIN + 1,
                                    INT64_MAX,
                                    INT32_MAX,
                                    INT32_MIN,
                                    (int64_t)1 << 32,
                                    (int64_t)1 << 40,
                                    ((int64_t)1 << 61) + 1,
                                    ((int64_t)1 << 62) + 1,
                                    -((int64_t)1 << 32),
                                    1000,
                                    65536};
    uint8_t c = fuzz_u8(in);
    if (c < 240)
        return (int64_t)(c % 24) - 4;
    return edges[(size_t)(c - 240) % (sizeof edges / sizeof edges[0])];
}

/* ---- Arrays ----------------------------------------------------------------------------- */

/* Offset (in elements) of the element at row-major linear index k, through the strides. */
static inline ptrdiff_t fuzz_offset(const cr_array *a, size_t k)
{
    ptrdiff_t off = 0;
    for (size_t d = a->ndim; d-- > 0;) {
        size_t e = a->shape[d];
        off += (ptrdiff_t)(k % e) * a->strides[d];
        k /= e;
    }
    return off;
}

/* Write element at offset off of a (any dtype) from the input. */
static inline void fuzz_put(fuzz_in *in, cr_array *a, ptrdiff_t off)
{
    switch ((cr_dtype)a->dtype) {
    case CR_DT_F64:
        ((double *)a->data)[off] = fuzz_double(in);
        break;
    case CR_DT_F32:
        ((float *)a->data)[off] = (float)fuzz_double(in);
        break;
    case CR_DT_C128: {
        double *p = (double *)a->data + 2 * off;
        p[0] = fuzz_double(in);
        p[1] = fuzz_double(in);
        break;
    }
    case CR_DT_I64:
        ((int64_t *)a->data)[off] = fuzz_int(in);
        break;
    case CR_DT_BOOL:
        ((bool *)a->data)[off] = fuzz_bool(in);
        break;
    }
}

/* Fill the stored elements of a (a Diagonal's n diagonal entries, every element otherwise;
 * with zero strides the same element is written again) from the input. */
static inline void fuzz_fill(fuzz_in *in, cr_array *a)
{
    if (a->data == NULL)
        return;
    if (a->structure == CR_MAT_DIAGONAL && a->ndim == 2) {
        for (size_t k = 0; k < a->shape[0]; k++)
            fuzz_put(in, a, (ptrdiff_t)k * a->strides[0]);
        return;
    }
    size_t n = cr_array_numel(a);
    for (size_t k = 0; k < n; k++)
        fuzz_put(in, a, fuzz_offset(a, k));
}

/* A shape: ndim in 0..3 (mostly 1 or 2), extents in 0..5, sometimes up to 9; a 2-d shape is
 * square half of the time. At most 9^3 elements. */
static inline size_t fuzz_shape(fuzz_in *in, size_t *shape)
{
    static const uint8_t ndims[8] = {1, 1, 1, 2, 2, 2, 0, 3};
    size_t nd = ndims[fuzz_u8(in) & 7u];
    for (size_t d = 0; d < nd; d++) {
        uint8_t c = fuzz_u8(in);
        shape[d] = c < 224 ? c % 6 : c % 10;
    }
    if (nd == 2 && fuzz_bool(in))
        shape[1] = shape[0];
    return nd;
}

/* An array of dtype dt and the given shape in `arena`, with a layout drawn from the input:
 * row-major, column-major, the first dimension reversed (a negative stride), every other
 * element (stride 2), or a zero stride (one element seen many times); a square f64, f32 or
 * c128 matrix sometimes carries a structure tag. NULL when the arena is out of memory. */
static inline cr_array *fuzz_array_shaped(fuzz_in *in, cr_arena *arena, cr_dtype dt, size_t nd,
                                          const size_t *shape)
{
    cr_array *a = cr_arena_alloc(arena, sizeof *a, _Alignof(cr_array));
    if (a == NULL)
        return NULL;
    memset(a, 0, sizeof *a);
    a->dtype = (uint8_t)dt;
    a->ndim = (uint8_t)nd;
    size_t numel = 1;
    for (size_t d = 0; d < nd; d++) {
        a->shape[d] = shape[d];
        numel *= shape[d];
    }
    uint8_t layout = fuzz_u8(in);
    /* row-major strides first */
    ptrdiff_t st = 1;
    for (size_t d = nd; d-- > 0;) {
        a->strides[d] = st;
        st *= (ptrdiff_t)(shape[d] > 0 ? shape[d] : 1);
    }
    if (nd >= 2 && (layout & 7u) == 1) { /* column-major */
        st = 1;
        for (size_t d = 0; d < nd; d++) {
            a->strides[d] = st;
            st *= (ptrdiff_t)(shape[d] > 0 ? shape[d] : 1);
        }
    } else if ((layout & 7u) == 2) { /* stride 2 */
        for (size_t d = 0; d < nd; d++)
            a->strides[d] *= 2;
    } else if (nd >= 1 && (layout & 7u) == 3) { /* a zero stride */
        a->strides[(layout >> 3) % nd] = 0;
    }
    bool reversed = nd >= 1 && (layout & 7u) == 4;
    if (reversed)
        a->strides[0] = -a->strides[0];
    bool square = nd == 2 && shape[0] == shape[1];
    if (square && cr_dtype_is_float(dt) && (layout >> 5) == 7)
        a->structure = (uint8_t)(1 + fuzz_below(in, 5)); /* DIAGONAL .. LOWER */
    /* The span of the offsets the strides reach. */
    ptrdiff_t lo = 0, hi = 0;
    for (size_t d = 0; d < nd; d++) {
        if (shape[d] == 0)
            continue;
        ptrdiff_t reach = (ptrdiff_t)(shape[d] - 1) * a->strides[d];
        if (reach < 0)
            lo += reach;
        else
            hi += reach;
    }
    size_t esize = cr_dtype_size(dt);
    size_t span = numel == 0 ? 1 : (size_t)(hi - lo) + 1;
    char *buf = cr_arena_calloc(arena, span, esize, 16);
    if (buf == NULL)
        return NULL;
    a->data = buf + (size_t)(-lo) * esize;
    fuzz_fill(in, a);
    return a;
}

static inline cr_array *fuzz_array(fuzz_in *in, cr_arena *arena, cr_dtype dt)
{
    size_t shape[3];
    size_t nd = fuzz_shape(in, shape);
    return fuzz_array_shaped(in, arena, dt, nd, shape);
}

#endif /* CR_FUZZ_COMMON_H */
