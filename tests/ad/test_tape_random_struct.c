/*
 * Random programs over described C structs (friendly tangents; SQLite's spirit: generated
 * cases, each replayable from its seed). The C types must exist at compile time, so a fixed
 * pool of real struct types (double, float, int, int64_t and bool fields, cr_array fields,
 * nested structs two levels deep, fields in odd orders with padding) is described by static
 * descriptors; each program picks one of them as its root (so the nestings differ) and draws
 * everything else: the field values, each array field's shape (1 to 40 elements, vectors and
 * matrices), dtype (f64 or f32) and strides (strided, negative, column-major views), the
 * destinations the gradients are written into, and a straight-line program over the real and
 * array fields (inline arithmetic, named functions, sum, dot, broadcasts, fused kernels,
 * getindex) ending in a scalar loss. A plain-C interpreter of the same program over a flat
 * vector of the fields' values is the reference. Checked, for each program:
 *
 *  1. cr_tape_gradient_struct[_arrays]: every real field against fourth-order central
 *     differences (float fields in float), integer and bool fields zeroed, each array
 *     field's gradient in the caller's buffer (random dtype and strides, sometimes another
 *     shape of as many elements), the buffer's gaps untouched;
 *  2. the raw tangent (cr_tape_gradient_tangent[_arrays]) against the friendly struct field
 *     by field (NoTangent for integers, ZeroTangent for arrays in the plain form), and
 *     against cr_tape_gradient[_arrays] on the variables cr_tape_struct_field() and
 *     cr_tape_struct_array_field() find by path;
 *  3. a customised conversion (cr_engine_friendly) of one pool type, found at any depth: it
 *     is applied at every occurrence of the type (and not to a twin descriptor of the same C
 *     type); a conversion that fails gives its status and message and leaves grad as it was;
 *  4. error paths: a destination array field without data (CR_EINVAL naming it), of another
 *     size (CR_ESHAPE), field paths that name no real or array field, variables of an earlier
 *     recording (CR_ETAPE), each reported on the context only (the tape stays usable and the
 *     next call gives the same gradient); and one failure that is the tape's (a variable of
 *     an earlier recording in an operation, a struct whose array field is not a float array,
 *     too little room for the inputs): sticky until the reset;
 *  5. one tape reset and reused for every program; the previous program's variables (whose
 *     arrays are freed) are refused with CR_ETAPE.
 *
 * Replay a failure: CR_RANDOM_SEED=<seed printed> build/tests/test_tape_random_struct
 * (CR_RANDOM_DUMP=1 prints the program). Run longer: CR_RANDOM_PROGRAMS=<programs>.
 */
#include <chainrules/kernel.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules/tape_inline.h>

#include "test_random.h"
#include "test_util.h"

/* ---- The pool of struct types ------------------------------------------------------------ */

typedef struct p_leaf {
    float f;
    int k;
    double a;
    bool on;
    double b;
} p_leaf;

typedef struct p_arr {
    cr_array w;
    float g;
    cr_array v;
    int64_t id;
} p_arr;

typedef struct p_mid {
    bool flag;
    p_leaf L;
    double c;
    p_arr A;
    float h;
} p_mid;

typedef struct p_top {
    float s;
    p_mid M;
    int64_t n;
    cr_array u;
    p_leaf L2;
    double d;
} p_top;

typedef struct p_odd {
    bool b1;
    cr_array z;
    bool b2;
    float y;
    int k;
    double x;
    cr_array q;
} p_odd;

static const cr_field leaf_fields[] = {
    {"f", offsetof(p_leaf, f), CR_KIND_F32, NULL}, {"k", offsetof(p_leaf, k), CR_KIND_I32, NULL},
    {"a", offsetof(p_leaf, a), CR_KIND_F64, NULL}, {"on", offsetof(p_leaf, on), CR_KIND_BOOL, NULL},
    {"b", offsetof(p_leaf, b), CR_KIND_F64, NULL},
};
static const cr_type leaf_type = {"leaf", sizeof(p_leaf), 5, leaf_fields};
/* Another descriptor of the same C type: a conversion registered for leaf is not its. */
static const cr_type twin_type = {"twin", sizeof(p_leaf), 5, leaf_fields};
static const cr_field arr_fields[] = {
    {"w", offsetof(p_arr, w), CR_KIND_ARRAY, NULL},
    {"g", offsetof(p_arr, g), CR_KIND_F32, NULL},
    {"v", offsetof(p_arr, v), CR_KIND_ARRAY, NULL},
    {"id", offsetof(p_arr, id), CR_KIND_I64, NULL},
};
static const cr_type arr_type = {"arr", sizeof(p_arr), 4, arr_fields};
static const cr_field mid_fields[] = {
    {"flag", offsetof(p_mid, flag), CR_KIND_BOOL, NULL},
    {"L", offsetof(p_mid, L), CR_KIND_STRUCT, &leaf_type},
    {"c", offsetof(p_mid, c), CR_KIND_F64, NULL},
    {"A", offsetof(p_mid, A), CR_KIND_STRUCT, &arr_type},
    {"h", offsetof(p_mid, h), CR_KIND_F32, NULL},
};
static const cr_type mid_type = {"mid", sizeof(p_mid), 5, mid_fields};
static const cr_field top_fields[] = {
    {"s", offsetof(p_top, s), CR_KIND_F32, NULL},
    {"M", offsetof(p_top, M), CR_KIND_STRUCT, &mid_type},
    {"n", offsetof(p_top, n), CR_KIND_I64, NULL},
    {"u", offsetof(p_top, u), CR_KIND_ARRAY, NULL},
    {"L2", offsetof(p_top, L2), CR_KIND_STRUCT, &leaf_type},
    {"d", offsetof(p_top, d), CR_KIND_F64, NULL},
};
static const cr_type top_type = {"top", sizeof(p_top), 6, top_fields};
static const cr_field odd_fields[] = {
    {"b1", offsetof(p_odd, b1), CR_KIND_BOOL, NULL}, {"z", offsetof(p_odd, z), CR_KIND_ARRAY, NULL},
    {"b2", offsetof(p_odd, b2), CR_KIND_BOOL, NULL}, {"y", offsetof(p_odd, y), CR_KIND_F32, NULL},
    {"k", offsetof(p_odd, k), CR_KIND_I32, NULL},    {"x", offsetof(p_odd, x), CR_KIND_F64, NULL},
    {"q", offsetof(p_odd, q), CR_KIND_ARRAY, NULL},
};
static const cr_type odd_type = {"odd", sizeof(p_odd), 7, odd_fields};

enum { T_LEAF, T_ARR, T_MID, T_TOP, T_ODD, T_TWIN, NTYPES };
static const cr_type *const k_types[NTYPES] = {&leaf_type, &arr_type, &mid_type,
                                               &top_type,  &odd_type, &twin_type};
/* The types a conversion is registered for (one engine each). */
enum { NCONV = 3 };
static const cr_type *const k_conv_types[NCONV] = {&leaf_type, &arr_type, &mid_type};

/* ---- A root's fields, walked by the test ---------------------------------------------------- */

#define MAXSLOTS 40
#define MAXARR   4
#define MAXLEN   40
#define MAXINS   28

typedef struct slot {
    cr_kind kind;
    size_t off; /* byte offset in the root */
    char path[24];
    const char *fname, *owner; /* the field's name and its struct's type name */
    bool conv;                 /* inside an occurrence of the converted type */
    size_t arr;                /* CR_KIND_ARRAY: index among the array fields */
} slot;

/* An array field's input and the destination its gradient goes into. */
typedef struct afield {
    size_t slot;
    size_t ndim, shape[2], numel, xoff; /* xoff: its first element in x */
    ptrdiff_t strides[2];
    cr_dtype dt;
    void *buf;              /* the memory (the data pointer may be inside it) */
    bool kernel_ok, shared; /* shared: the same memory as an earlier field's (not freed) */
    /* the destination */
    size_t dndim, dshape[2];
    ptrdiff_t dstrides[2];
    cr_dtype ddt;
    void *dbuf;
    size_t dcount, dstart; /* elements of dbuf, the data pointer's element */
} afield;

typedef struct ins {
    int op;
    size_t a, b, X, Y, off;
    double w; /* its weight in the loss */
    int flag;
} ins;

typedef struct prog {
    uint64_t seed;
    int root, conv; /* a k_types index, a k_conv_types index */
    const cr_type *type;
    slot s[MAXSLOTS];
    size_t ns, nreal, nint, narr, nconv;
    size_t real[MAXSLOTS], ints[MAXSLOTS];
    afield af[MAXARR];
    size_t nx; /* reals, then the arrays' elements */
    double x[MAXSLOTS + MAXARR * MAXLEN];
    double ival[MAXSLOTS]; /* the integer fields as the program reads them */
    unsigned char *obj;
    ins in[MAXINS];
    size_t nins;
    bool f32; /* an f32 array: the rules compute in float */
} prog;

static void walk(prog *p, const cr_type *ty, size_t base, const char *prefix, bool conv)
{
    for (size_t i = 0; i < ty->nfields; i++) {
        const cr_field *fd = &ty->fields[i];
        char path[24];
        snprintf(path, sizeof path, "%s%s", prefix, fd->name);
        if (fd->kind == CR_KIND_STRUCT) {
            bool c = conv || fd->type == k_conv_types[p->conv];
            if (!conv && c)
                p->nconv++;
            char pre[24];
            size_t len = strlen(path);
            assert_true(len + 2 <= sizeof pre);
            memcpy(pre, path, len);
            pre[len] = '.';
            pre[len + 1] = '\0';
            walk(p, fd->type, base + fd->offset, pre, c);
            continue;
        }
        slot *s = &p->s[p->ns++];
        s->kind = fd->kind;
        s->off = base + fd->offset;
        memcpy(s->path, path, sizeof path);
        s->fname = fd->name;
        s->owner = ty->name;
        s->conv = conv;
        if (fd->kind == CR_KIND_F64 || fd->kind == CR_KIND_F32)
            p->real[p->nreal++] = p->ns - 1;
        else if (fd->kind == CR_KIND_ARRAY)
            s->arr = p->narr++;
        else
            p->ints[p->nint++] = p->ns - 1;
    }
}

/* Element e (row-major logical index) of an array, as a double; and stored. */
static void elem_off(size_t ndim, const size_t *shape, const ptrdiff_t *strides, size_t e,
                     ptrdiff_t *off)
{
    ptrdiff_t o = 0;
    for (size_t d = ndim; d-- > 0;) {
        o += (ptrdiff_t)(e % shape[d]) * strides[d];
        e /= shape[d];
    }
    *off = o;
}

static double arr_get(const cr_array *a, size_t e)
{
    ptrdiff_t o;
    elem_off(a->ndim, a->shape, a->strides, e, &o);
    if (a->dtype == CR_DT_F32)
        return (double)((const float *)a->data)[o];
    return ((const double *)a->data)[o];
}

static void arr_set(cr_array *a, size_t e, double v)
{
    ptrdiff_t o;
    elem_off(a->ndim, a->shape, a->strides, e, &o);
    if (a->dtype == CR_DT_F32)
        ((float *)a->data)[o] = (float)v;
    else
        ((double *)a->data)[o] = v;
}

/* The memory an array of this shape and strides spans: elements, and the data pointer's. */
static void span(size_t ndim, const size_t *shape, const ptrdiff_t *strides, size_t *count,
                 size_t *start)
{
    ptrdiff_t lo = 0, hi = 0;
    for (size_t d = 0; d < ndim; d++) {
        ptrdiff_t ext = strides[d] * (ptrdiff_t)(shape[d] - 1);
        if (ext < 0)
            lo += ext;
        else
            hi += ext;
    }
    *count = (size_t)(hi - lo + 1);
    *start = (size_t)(-lo);
}

/* Random strides for a shape: contiguous, strided, negative, or column-major. */
static void draw_strides(uint64_t *s, size_t ndim, const size_t *shape, ptrdiff_t *strides)
{
    double r = rnd_unit(s);
    if (ndim == 1) {
        static const ptrdiff_t k[5] = {1, 2, 3, -1, -2};
        strides[0] = r < 0.4 ? 1 : k[rnd_below(s, 5)];
        return;
    }
    if (r < 0.4) { /* row-major */
        strides[0] = (ptrdiff_t)shape[1];
        strides[1] = 1;
    } else if (r < 0.7) { /* padded rows */
        strides[0] = (ptrdiff_t)(shape[1] + 1 + rnd_below(s, 3));
        strides[1] = 1;
    } else { /* column-major */
        strides[0] = 1;
        strides[1] = (ptrdiff_t)shape[0];
    }
}

static size_t dtsize(cr_dtype dt)
{
    return dt == CR_DT_F32 ? sizeof(float) : sizeof(double);
}

/* A buffer of count elements, filled with fill (NaN for an input's gaps, a sentinel for a
 * destination's). */
static void *new_buf(cr_dtype dt, size_t count, double fill)
{
    void *b = malloc(count * dtsize(dt));
    assert_non_null(b);
    for (size_t i = 0; i < count; i++) {
        if (dt == CR_DT_F32)
            ((float *)b)[i] = (float)fill;
        else
            ((double *)b)[i] = fill;
    }
    return b;
}

static cr_array view(void *buf, size_t start, cr_dtype dt, size_t ndim, const size_t *shape,
                     const ptrdiff_t *strides)
{
    cr_array a;
    assert_int_equal(
        cr_array_view_init(&a, (unsigned char *)buf + start * dtsize(dt), dt, ndim, shape, strides),
        CR_OK);
    return a;
}

/* A value on a grid of 2^-16, so that an f32 holds it exactly. */
static double draw_value(uint64_t *s)
{
    return ldexp(floor(ldexp(rnd_range(s, -1.5, 1.5), 16)), -16);
}

/* ---- Programs ---------------------------------------------------------------------------- */

enum op {
    /* scalar, registers a and b */
    O_AVG,  /* (a + b) / 2 */
    O_MULS, /* a b / (1 + b^2) */
    O_DIVS, /* a / (1.5 + b^2) */
    O_SUB,  /* (a - b) / 2, through the exported function */
    O_SIN,  /* sin(a) */
    O_ACOS, /* a cos(b) */
    O_EXPS, /* exp(sin(a) / 2) */
    O_LOG,  /* log(1 + a^2) */
    O_SQRT, /* sqrt(1 + a^2) - 1 */
    O_ASIN, /* asin(sin(a) / 2) */
    O_TANH, /* tanh(a) through cr_tape_call */
    /* arrays X (and Y), register a */
    O_SUM,  /* sum(X) / n */
    O_DOT,  /* dot(X, Y) / n, Y of X's shape (or X) */
    O_BC,   /* sum(sin.(X .* a)) / n */
    O_BC2,  /* sum((X .+ Y) .* X) / (2 n) */
    O_KSUM, /* sum over i >= off of kx(X[i], a), / (n - off) */
    O_KMAP, /* Z = ky(X[off:], a); sum(Z) or dot(Z, Z), / (n - off) */
    O_GET,  /* X[off] (linear) */
    O_COUNT
};
static const char *const k_op_names[O_COUNT] = {"avg",  "muls", "divs", "sub",  "sin",  "acos",
                                                "exps", "log",  "sqrt", "asin", "tanh", "sum",
                                                "dot",  "bc",   "bc2",  "ksum", "kmap", "get"};

/* kx(e, s) = e cos(s) + sin(e)^2 / 2;  ky(e, s) = tanh(e + s) e */
#define KX(x) cr_k_add(cr_k_mul(x[0], cr_k_cos(x[1])), cr_k_mul(0.5, cr_k_sq(cr_k_sin(x[0]))))
CR_KERNEL(k_kx, 2, KX);
#define KY(x) cr_k_mul(cr_k_tanh(cr_k_add(x[0], x[1])), x[0])
CR_KERNEL(k_ky, 2, KY);

static double kx_c(double e, double s)
{
    double q = sin(e);
    return e * cos(s) + 0.5 * (q * q);
}

static double ky_c(double e, double s)
{
    return tanh(e + s) * e;
}

static size_t nregs0(const prog *p)
{
    return p->nreal + p->nint;
}

static void gen_arrays(prog *p, uint64_t *s)
{
    size_t xo = p->nreal;
    for (size_t j = 0; j < p->narr; j++) {
        afield *a = &p->af[j];
        for (size_t i = 0; i < p->ns; i++)
            if (p->s[i].kind == CR_KIND_ARRAY && p->s[i].arr == j)
                a->slot = i;
        a->dt = rnd_unit(s) < 0.3 ? CR_DT_F32 : CR_DT_F64;
        if (j > 0 && rnd_unit(s) < 0.1) { /* two fields view the same memory */
            const afield *b = &p->af[rnd_below(s, j)];
            cr_array v;
            memcpy(&v, p->obj + p->s[b->slot].off, sizeof v);
            memcpy(p->obj + p->s[a->slot].off, &v, sizeof v);
            a->dt = b->dt;
            a->ndim = b->ndim;
            a->numel = b->numel;
            a->kernel_ok = b->kernel_ok;
            memcpy(a->shape, b->shape, sizeof a->shape);
            memcpy(a->strides, b->strides, sizeof a->strides);
            a->buf = b->buf;
            a->shared = true;
            a->xoff = xo;
            memcpy(p->x + xo, p->x + b->xoff, a->numel * sizeof *p->x);
            xo += a->numel;
        } else if (j > 0 && rnd_unit(s) < 0.4) { /* another array's shape: dot and bc2 pair them */
            const afield *b = &p->af[rnd_below(s, j)];
            a->ndim = b->ndim;
            memcpy(a->shape, b->shape, sizeof a->shape);
        } else if (rnd_unit(s) < 0.8) {
            a->ndim = 1;
            a->shape[0] = 1 + rnd_below(s, rnd_unit(s) < 0.5 ? 8 : MAXLEN);
        } else {
            a->ndim = 2;
            a->shape[0] = 1 + rnd_below(s, 5);
            a->shape[1] = 1 + rnd_below(s, 8);
        }
        if (!a->shared) {
            a->numel = a->shape[0] * (a->ndim == 2 ? a->shape[1] : 1);
            draw_strides(s, a->ndim, a->shape, a->strides);
            a->kernel_ok =
                a->ndim == 1 || (a->strides[1] == 1 && a->strides[0] == (ptrdiff_t)a->shape[1]);
            size_t count, start;
            span(a->ndim, a->shape, a->strides, &count, &start);
            a->buf = new_buf(a->dt, count, (double)NAN);
            cr_array v = view(a->buf, start, a->dt, a->ndim, a->shape, a->strides);
            a->xoff = xo;
            for (size_t e = 0; e < a->numel; e++) {
                double x = draw_value(s);
                arr_set(&v, e, x);
                p->x[xo++] = x;
            }
            memcpy(p->obj + p->s[a->slot].off, &v, sizeof v);
        }
        if (a->dt == CR_DT_F32)
            p->f32 = true;
        /* the destination: the input's shape (or another of as many elements), any dtype and
         * strides */
        a->ddt = rnd_unit(s) < 0.4 ? CR_DT_F32 : CR_DT_F64;
        a->dndim = a->ndim;
        memcpy(a->dshape, a->shape, sizeof a->dshape);
        if (rnd_unit(s) < 0.25) {
            if (a->ndim == 2) {
                a->dndim = 1;
                a->dshape[0] = a->numel;
            } else {
                size_t r = 1 + rnd_below(s, a->numel);
                while (a->numel % r != 0)
                    r--;
                a->dndim = 2;
                a->dshape[0] = r;
                a->dshape[1] = a->numel / r;
            }
        }
        draw_strides(s, a->dndim, a->dshape, a->dstrides);
        span(a->dndim, a->dshape, a->dstrides, &a->dcount, &a->dstart);
        a->dbuf = new_buf(a->ddt, a->dcount, 777.0);
    }
    p->nx = xo;
}

static void gen_prog(prog *p, uint64_t seed)
{
    uint64_t s = seed;
    memset(p, 0, sizeof *p);
    p->seed = seed;
    p->root = (int)rnd_below(&s, NTYPES);
    p->conv = (int)rnd_below(&s, NCONV);
    p->type = k_types[p->root];
    if (p->type == k_conv_types[p->conv])
        p->nconv = 1;
    walk(p, p->type, 0, "", p->nconv == 1);
    p->obj = calloc(1, p->type->size);
    assert_non_null(p->obj);
    for (size_t i = 0; i < p->nreal; i++) { /* the real fields */
        const slot *sl = &p->s[p->real[i]];
        double v = draw_value(&s);
        p->x[i] = v;
        if (sl->kind == CR_KIND_F32) {
            float f = (float)v;
            memcpy(p->obj + sl->off, &f, sizeof f);
        } else {
            memcpy(p->obj + sl->off, &v, sizeof v);
        }
    }
    for (size_t i = 0; i < p->nint; i++) { /* integers and bools: constants of the program */
        const slot *sl = &p->s[p->ints[i]];
        int64_t k = (int64_t)rnd_below(&s, 17) - 8;
        if (sl->kind == CR_KIND_I32) {
            int v = (int)k;
            memcpy(p->obj + sl->off, &v, sizeof v);
            p->ival[i] = (double)v / 8;
        } else if (sl->kind == CR_KIND_I64) {
            memcpy(p->obj + sl->off, &k, sizeof k);
            p->ival[i] = (double)k / 8;
        } else {
            bool b = k > 0;
            memcpy(p->obj + sl->off, &b, sizeof b);
            p->ival[i] = b ? 1.0 : 0.0;
        }
    }
    gen_arrays(p, &s);
    p->nins = 1 + rnd_below(&s, MAXINS);
    for (size_t i = 0; i < p->nins; i++) {
        ins *in = &p->in[i];
        size_t nreg = nregs0(p) + i;
        if (p->narr > 0 && rnd_unit(&s) < 0.45) {
            in->op = O_SUM + (int)rnd_below(&s, O_COUNT - O_SUM);
            in->X = rnd_below(&s, p->narr);
            const afield *X = &p->af[in->X];
            in->Y = in->X;
            size_t cands[MAXARR], nc = 0;
            for (size_t j = 0; j < p->narr; j++)
                if (p->af[j].ndim == X->ndim && p->af[j].shape[0] == X->shape[0] &&
                    (X->ndim == 1 || p->af[j].shape[1] == X->shape[1]))
                    cands[nc++] = j;
            in->Y = cands[rnd_below(&s, nc)];
            if ((in->op == O_KSUM || in->op == O_KMAP) && !X->kernel_ok)
                in->op = O_BC;
            in->off = rnd_below(&s, X->numel);
            if (in->op == O_KSUM || in->op == O_KMAP)
                in->off = rnd_unit(&s) < 0.5 ? 0 : rnd_below(&s, X->numel);
            in->flag = (int)rnd_below(&s, 2);
            in->a = rnd_below(&s, nreg); /* every type has a real field */
        } else {
            in->op = (int)rnd_below(&s, O_SUM);
            in->a = rnd_below(&s, nreg);
            in->b = rnd_below(&s, nreg);
        }
        in->w = rnd_range(&s, -1.0, 1.0);
    }
}

static void free_prog(prog *p)
{
    for (size_t j = 0; j < p->narr; j++) {
        if (!p->af[j].shared)
            free(p->af[j].buf);
        free(p->af[j].dbuf);
    }
    free(p->obj);
}

static void dump_prog(const prog *p)
{
    printf("program 0x%016" PRIx64 ": root %s, conversion of %s (%zu occurrences)\n", p->seed,
           p->type->name, k_conv_types[p->conv]->name, p->nconv);
    for (size_t i = 0; i < p->ns; i++) {
        const slot *sl = &p->s[i];
        printf("  field %-8s %-5s at %3zu%s", sl->path, cr_kind_name(sl->kind), sl->off,
               sl->conv ? " (converted)" : "");
        if (sl->kind == CR_KIND_ARRAY) {
            const afield *a = &p->af[sl->arr];
            printf(" X%zu%s: %s (%zu", sl->arr, a->shared ? " (shared memory)" : "",
                   cr_dtype_name(a->dt), a->shape[0]);
            if (a->ndim == 2)
                printf(", %zu", a->shape[1]);
            printf(") strides (%td", a->strides[0]);
            if (a->ndim == 2)
                printf(", %td", a->strides[1]);
            printf("); gradient into %s (%zu", cr_dtype_name(a->ddt), a->dshape[0]);
            if (a->dndim == 2)
                printf(", %zu", a->dshape[1]);
            printf(") strides (%td", a->dstrides[0]);
            if (a->dndim == 2)
                printf(", %td", a->dstrides[1]);
            printf(")");
        }
        printf("\n");
    }
    printf("  registers: r0..r%zu the real fields, then %zu integer fields\n", p->nreal, p->nint);
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->in[i];
        printf("  r%zu = %s", nregs0(p) + i, k_op_names[in->op]);
        if (in->op >= O_SUM)
            printf("(X%zu, X%zu, r%zd, off %zu, flag %d)", in->X, in->Y, (ptrdiff_t)in->a, in->off,
                   in->flag);
        else
            printf("(r%zd, r%zd)", (ptrdiff_t)in->a, (ptrdiff_t)in->b);
        printf("  weight %.17g\n", in->w);
    }
}

/* ---- The plain-C interpreter --------------------------------------------------------------- */

static double interp(const prog *p, const double *x)
{
    double r[MAXSLOTS * 2 + MAXINS], y = 0;
    size_t n0 = nregs0(p);
    memcpy(r, x, p->nreal * sizeof *x);
    memcpy(r + p->nreal, p->ival, p->nint * sizeof *r);
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->in[i];
        double a = r[in->a], b = in->op < O_SUM ? r[in->b] : 0, v = 0;
        const double *X = in->op >= O_SUM ? x + p->af[in->X].xoff : NULL;
        const double *Y = in->op >= O_SUM ? x + p->af[in->Y].xoff : NULL;
        size_t n = in->op >= O_SUM ? p->af[in->X].numel : 0;
        switch (in->op) {
        case O_AVG:
            v = 0.5 * (a + b);
            break;
        case O_MULS:
            v = a * b / (1.0 + b * b);
            break;
        case O_DIVS:
            v = a / (1.5 + b * b);
            break;
        case O_SUB:
            v = 0.5 * (a - b);
            break;
        case O_SIN:
            v = sin(a);
            break;
        case O_ACOS:
            v = a * cos(b);
            break;
        case O_EXPS:
            v = exp(0.5 * sin(a));
            break;
        case O_LOG:
            v = log(1.0 + a * a);
            break;
        case O_SQRT:
            v = sqrt(1.0 + a * a) - 1.0;
            break;
        case O_ASIN:
            v = asin(0.5 * sin(a));
            break;
        case O_TANH:
            v = tanh(a);
            break;
        case O_SUM:
            for (size_t e = 0; e < n; e++)
                v += X[e];
            v /= (double)n;
            break;
        case O_DOT:
            for (size_t e = 0; e < n; e++)
                v += X[e] * Y[e];
            v /= (double)n;
            break;
        case O_BC:
            for (size_t e = 0; e < n; e++)
                v += sin(X[e] * a);
            v /= (double)n;
            break;
        case O_BC2:
            for (size_t e = 0; e < n; e++)
                v += (X[e] + Y[e]) * X[e];
            v /= (double)(2 * n);
            break;
        case O_KSUM:
            for (size_t e = in->off; e < n; e++)
                v += kx_c(X[e], a);
            v /= (double)(n - in->off);
            break;
        case O_KMAP:
            for (size_t e = in->off; e < n; e++) {
                double z = ky_c(X[e], a);
                v += in->flag ? z * z : z;
            }
            v /= (double)(n - in->off);
            break;
        default: /* O_GET */
            v = X[in->off];
            break;
        }
        r[n0 + i] = v;
        y += in->w * v;
    }
    return y;
}

/* ---- The program on a tape ------------------------------------------------------------------ */

/* The loss recorded on t from the struct's variables, which are found by path. */
static cr_var tape_prog(ck *c, const prog *p, cr_tape *t, const cr_var *vars, const cr_avar *avars)
{
    cr_var r[MAXSLOTS * 2 + MAXINS];
    cr_avar A[MAXARR];
    size_t n0 = nregs0(p);
    for (size_t i = 0; i < p->nreal; i++) {
        r[i] = cr_tape_struct_field(p->type, vars, p->s[p->real[i]].path);
        if (r[i].v != p->x[i])
            ck_fail(c, "the variable of %s holds %.17g, the field %.17g", p->s[p->real[i]].path,
                    r[i].v, p->x[i]);
    }
    for (size_t i = 0; i < p->nint; i++)
        r[p->nreal + i] = cr_const(p->ival[i]);
    for (size_t j = 0; j < p->narr; j++) {
        A[j] = cr_tape_struct_array_field(p->type, avars, p->s[p->af[j].slot].path);
        if (A[j].a != (const cr_array *)(const void *)(p->obj + p->s[p->af[j].slot].off))
            ck_fail(c, "the array variable of %s is not the field", p->s[p->af[j].slot].path);
    }
    cr_var y = cr_const(0.0);
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->in[i];
        cr_var a = r[in->a];
        cr_var b = in->op < O_SUM ? r[in->b] : cr_const(0.0), v;
        cr_avar X = in->op >= O_SUM ? A[in->X] : cr_av_const(NULL);
        cr_avar Y = in->op >= O_SUM ? A[in->Y] : cr_av_const(NULL);
        size_t n = in->op >= O_SUM ? p->af[in->X].numel : 1;
        switch (in->op) {
        case O_AVG:
            v = cr_mul(t, cr_const(0.5), cr_add(t, a, b));
            break;
        case O_MULS:
            v = cr_div(t, cr_mul(t, a, b), cr_add(t, cr_const(1.0), cr_mul(t, b, b)));
            break;
        case O_DIVS:
            v = cr_div(t, a, cr_add(t, cr_const(1.5), cr_mul(t, b, b)));
            break;
        case O_SUB:
            v = (cr_mul)(t, cr_const(0.5), (cr_sub)(t, a, b));
            break;
        case O_SIN:
            v = cr_sin(t, a);
            break;
        case O_ACOS:
            v = cr_mul(t, a, cr_cos(t, b));
            break;
        case O_EXPS:
            v = cr_exp(t, cr_mul(t, cr_const(0.5), cr_sin(t, a)));
            break;
        case O_LOG:
            v = cr_log(t, cr_add(t, cr_const(1.0), cr_mul(t, a, a)));
            break;
        case O_SQRT:
            v = cr_sub(t, cr_sqrt(t, cr_add(t, cr_const(1.0), cr_mul(t, a, a))), cr_const(1.0));
            break;
        case O_ASIN:
            v = cr_asin(t, cr_mul(t, cr_const(0.5), cr_sin(t, a)));
            break;
        case O_TANH:
            v = cr_tape_call1(t, &cr_fn_tanh, &a, 1);
            break;
        case O_SUM:
            v = cr_div(t, cr_av_sum(t, X), cr_const((double)n));
            break;
        case O_DOT:
            v = cr_div(t, cr_av_dot(t, X, Y), cr_const((double)n));
            break;
        case O_BC: {
            cr_avar Z = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_var(a));
            v = cr_div(t, cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(Z))),
                       cr_const((double)n));
            break;
        }
        case O_BC2: {
            cr_avar Z = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(X), cr_targ_arr(Y));
            cr_avar W = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(Z), cr_targ_arr(X));
            v = cr_div(t, cr_av_sum(t, W), cr_const((double)(2 * n)));
            break;
        }
        case O_KSUM: {
            cr_kin kin[2] = {cr_kin_arr(X, in->off), cr_kin_var(a)};
            v = cr_div(t, cr_av_kernel_sum(t, &k_kx, kin, 2, n - in->off),
                       cr_const((double)(n - in->off)));
            break;
        }
        case O_KMAP: {
            cr_kin kin[2] = {cr_kin_arr(X, in->off), cr_kin_var(a)};
            cr_avar Z = cr_av_kernel(t, &k_ky, kin, 2, n - in->off);
            v = cr_div(t, in->flag ? cr_av_dot(t, Z, Z) : cr_av_sum(t, Z),
                       cr_const((double)(n - in->off)));
            break;
        }
        default: {
            cr_targ args[2] = {cr_targ_arr(X), cr_targ_value(cr_value_i64((int64_t)in->off))};
            v = cr_tape_acall_s(t, &cr_fn_getindex, args, 2);
            break;
        }
        }
        r[n0 + i] = v;
        y = cr_add(t, y, cr_mul(t, cr_const(in->w), v));
    }
    return y;
}

/* Record the program on t (reset first): the struct's inputs, then the loss. */
static cr_var record(ck *c, const prog *p, cr_tape *t, cr_var *vars, cr_avar *avars, uint64_t *s)
{
    cr_tape_reset(t);
    /* other inputs first, the two kinds in either order, on the tape or the current one */
    double r = rnd_unit(s);
    cr_tape *ti = rnd_unit(s) < 0.3 ? NULL : t;
    cr_tape_set_current(ti == NULL ? t : NULL);
    if (rnd_unit(s) < 0.3)
        (void)cr_tape_input(t, 0.25);
    if (rnd_unit(s) < 0.3) {
        static double one = 1.0; /* borrowed by the tape until its reset */
        static cr_array oa;
        oa = cr_array_vector(&one, 1);
        (void)cr_tape_array_input(t, &oa);
    }
    for (int k = 0; k < 2; k++) {
        cr_status st;
        if ((k == 0) == (r < 0.5)) {
            st = cr_tape_struct_inputs(ti, p->type, p->obj, vars, MAXSLOTS);
            ck_status(c, "cr_tape_struct_inputs", st, cr_tape_errmsg(t));
        } else {
            st = cr_tape_struct_array_inputs(ti, p->type, p->obj, avars, p->narr);
            ck_status(c, "cr_tape_struct_array_inputs", st, cr_tape_errmsg(t));
        }
    }
    cr_tape_set_current(NULL);
    cr_var y = tape_prog(c, p, t, vars, avars);
    ck_status(c, "recording", cr_tape_status(t), cr_tape_errmsg(t));
    return y;
}

/* ---- Checks ---------------------------------------------------------------------------------- */

typedef struct conv_state {
    const cr_type *type;
    double c;
    bool fail, arrays; /* arrays: the raw tangent holds array tangents */
    size_t calls, bad;
    char why[200];
} conv_state;

typedef struct env {
    cr_ctx *ctx;
    cr_arena *arena;
    cr_tape *t; /* reused by every program */
    cr_engine *eng[NCONV];
    cr_tape *tc[NCONV];
    conv_state cs[NCONV];
    /* the previous program's variables on t (its arrays are freed) */
    bool have_prev;
    cr_var prev_var;
    cr_avar prev_avar;
    bool have_prev_avar;
    size_t programs, fields, elements, converted, conv_failed, err_nodata, err_size, err_path,
        err_old, err_old_array, sticky[3];
} env;

static void conv_bad(conv_state *cs, const char *what, const char *path)
{
    if (cs->bad++ == 0)
        snprintf(cs->why, sizeof cs->why, "%s at %s", what, path);
}

/* The test's conversion: every real field scaled by c, integers set to a mark, array fields
 * left as the sweep wrote them (their raw tangents must be those arrays). */
static void conv_write(conv_state *cs, const cr_type *ty, cr_tangent raw, unsigned char *dest)
{
    if (raw.tag != CR_TAN_STRUCT || raw.u.s.type != ty) {
        conv_bad(cs, "not a structural tangent of its type", ty->name);
        return;
    }
    for (size_t i = 0; i < ty->nfields; i++) {
        const cr_field *fd = &ty->fields[i];
        cr_tangent f = cr_tangent_field(raw, i);
        unsigned char *q = dest + fd->offset;
        switch (fd->kind) {
        case CR_KIND_F64: {
            double v = cs->c * f.u.f64;
            if (f.tag != CR_TAN_F64)
                conv_bad(cs, "an f64 field's tangent is not f64", fd->name);
            memcpy(q, &v, sizeof v);
            break;
        }
        case CR_KIND_F32: {
            float v = (float)(cs->c * (double)f.u.f32);
            if (f.tag != CR_TAN_F32)
                conv_bad(cs, "an f32 field's tangent is not f32", fd->name);
            memcpy(q, &v, sizeof v);
            break;
        }
        case CR_KIND_I32: {
            int v = 7;
            memcpy(q, &v, sizeof v);
            if (f.tag != CR_TAN_NONE)
                conv_bad(cs, "an integer field's tangent is not NoTangent", fd->name);
            break;
        }
        case CR_KIND_I64: {
            int64_t v = -7;
            memcpy(q, &v, sizeof v);
            if (f.tag != CR_TAN_NONE)
                conv_bad(cs, "an integer field's tangent is not NoTangent", fd->name);
            break;
        }
        case CR_KIND_BOOL: {
            bool v = true;
            memcpy(q, &v, sizeof v);
            if (f.tag != CR_TAN_NONE)
                conv_bad(cs, "a bool field's tangent is not NoTangent", fd->name);
            break;
        }
        case CR_KIND_STRUCT:
            conv_write(cs, fd->type, f, q);
            break;
        case CR_KIND_ARRAY: {
            const cr_array *d = (const cr_array *)(const void *)q;
            if (cs->arrays ? f.tag != CR_TAN_ARRAY || f.u.arr->data != d->data
                           : !cr_tangent_is_zero(f))
                conv_bad(cs, "an array field's tangent is not the gradient array", fd->name);
            break;
        }
        default:
            break;
        }
    }
}

static cr_status conv_fn(const cr_type *type, cr_tangent raw, void *dest, void *udata)
{
    conv_state *cs = udata;
    cs->calls++;
    if (type != cs->type)
        conv_bad(cs, "called for another type", type->name);
    if (cs->fail) {
        memset(dest, 0x5a, type->size); /* a partial write that must not reach grad */
        return CR_EDOMAIN;
    }
    conv_write(cs, type, raw, dest);
    return CR_OK;
}

/* The struct gradient's destination: grad (fresh bytes), its array fields over the
 * destination buffers (refilled with the sentinel). */
static void dest_struct(const prog *p, unsigned char *grad)
{
    memset(grad, 0xa5, p->type->size);
    for (size_t j = 0; j < p->narr; j++) {
        const afield *a = &p->af[j];
        for (size_t i = 0; i < a->dcount; i++) {
            if (a->ddt == CR_DT_F32)
                ((float *)a->dbuf)[i] = 777.0f;
            else
                ((double *)a->dbuf)[i] = 777.0;
        }
        cr_array d = view(a->dbuf, a->dstart, a->ddt, a->dndim, a->dshape, a->dstrides);
        memcpy(grad + p->s[a->slot].off, &d, sizeof d);
    }
}

/* The reference gradient: fourth-order central differences of the interpreter, with the
 * same stencil at 2h as the error estimate. */
static void reference(const prog *p, double *g, double *err)
{
    double x[MAXSLOTS + MAXARR * MAXLEN];
    memcpy(x, p->x, p->nx * sizeof *x);
    const double h = 1e-3;
    for (size_t i = 0; i < p->nx; i++) {
        double d[2] = {0, 0};
        for (int q = 0; q < 2; q++) {
            for (int k = 0; k < 4; k++) {
                x[i] = p->x[i] + k_fd_o[k] * h * (1 + q);
                d[q] += k_fd_c[k] * interp(p, x) / (h * (1 + q));
            }
            x[i] = p->x[i];
        }
        g[i] = d[0];
        err[i] = fabs(d[0] - d[1]);
    }
}

static double read_real(const unsigned char *obj, const slot *sl)
{
    if (sl->kind == CR_KIND_F32) {
        float f;
        memcpy(&f, obj + sl->off, sizeof f);
        return (double)f;
    }
    double v;
    memcpy(&v, obj + sl->off, sizeof v);
    return v;
}

/* An integer or bool field as it was written: the library's zero, or the conversion's
 * mark. */
static bool int_is(const unsigned char *obj, const slot *sl, bool mark)
{
    if (sl->kind == CR_KIND_I32) {
        int v;
        memcpy(&v, obj + sl->off, sizeof v);
        return v == (mark ? 7 : 0);
    }
    if (sl->kind == CR_KIND_I64) {
        int64_t v;
        memcpy(&v, obj + sl->off, sizeof v);
        return v == (mark ? -7 : 0);
    }
    unsigned char b;
    memcpy(&b, obj + sl->off, 1);
    return b == (mark ? 1 : 0);
}

/* Check a friendly gradient in grad against the reference g (err: its error estimates):
 * real fields (scaled by c inside converted structs when conv), integer fields, and the
 * array fields' destinations when arrays (untouched otherwise). */
static void check_friendly(ck *c, const prog *p, const unsigned char *grad, const double *g,
                           const double *err, bool arrays, bool conv, double cs)
{
    double got[MAXSLOTS + MAXARR * MAXLEN], want[MAXSLOTS + MAXARR * MAXLEN];
    double e[MAXSLOTS + MAXARR * MAXLEN];
    size_t n = 0;
    bool f32 = p->f32;
    for (size_t i = 0; i < p->nreal; i++) {
        const slot *sl = &p->s[p->real[i]];
        double k = conv && sl->conv ? cs : 1.0;
        got[n] = read_real(grad, sl);
        want[n] = k * g[i];
        e[n++] = fabs(k) * err[i];
        if (sl->kind == CR_KIND_F32)
            f32 = true;
    }
    for (size_t i = 0; i < p->nint; i++) {
        const slot *sl = &p->s[p->ints[i]];
        if (!int_is(grad, sl, conv && sl->conv))
            ck_fail(c, "the integer field %s is not %s", sl->path,
                    conv && sl->conv ? "the conversion's mark" : "zero");
    }
    for (size_t j = 0; j < p->narr; j++) {
        const afield *a = &p->af[j];
        cr_array d;
        memcpy(&d, grad + p->s[a->slot].off, sizeof d);
        cr_array want_d = view(a->dbuf, a->dstart, a->ddt, a->dndim, a->dshape, a->dstrides);
        if (memcmp(&d, &want_d, sizeof d) != 0)
            ck_fail(c, "the array field %s of grad was changed", p->s[a->slot].path);
        /* the gaps of the destination keep the sentinel */
        size_t inside = 0;
        for (size_t i = 0; i < a->dcount; i++) {
            double v = a->ddt == CR_DT_F32 ? (double)((float *)a->dbuf)[i] : ((double *)a->dbuf)[i];
            inside += v != 777.0;
        }
        if (!arrays) {
            if (inside != 0)
                ck_fail(c, "cr_tape_gradient_struct wrote the array field %s", p->s[a->slot].path);
            continue;
        }
        if (inside > a->numel)
            ck_fail(c, "the gradient of %s was written outside its destination's elements",
                    p->s[a->slot].path);
        if (a->ddt == CR_DT_F32)
            f32 = true;
        for (size_t k = 0; k < a->numel; k++) {
            got[n] = arr_get(&want_d, k);
            want[n] = g[a->xoff + k];
            e[n++] = err[a->xoff + k];
        }
    }
    cmp_vec(c, "friendly gradient", got, want, e, n, p->f32 ? 1e-4 : f32 ? 2e-7 : 1e-7);
}

/* 2. The raw tangent against the friendly struct, and cr_tape_gradient[_arrays] on the
 * variables found by path. */
static void check_raw(ck *c, env *ev, const prog *p, cr_tape *t, cr_var y, const cr_var *vars,
                      const cr_avar *avars, const unsigned char *grad, bool arrays)
{
    cr_tangent tan;
    cr_status st =
        arrays ? cr_tape_gradient_tangent_arrays(t, y, p->type, vars, avars, ev->arena, &tan)
               : cr_tape_gradient_tangent(t, y, p->type, vars, ev->arena, &tan);
    ck_status(c, "raw tangent", st, cr_ctx_errmsg(ev->ctx));
    if (st != CR_OK)
        return;
    cr_var fv[MAXSLOTS];
    double gv[MAXSLOTS];
    for (size_t i = 0; i < p->nreal; i++)
        fv[i] = cr_tape_struct_field(p->type, vars, p->s[p->real[i]].path);
    ck_status(c, "cr_tape_gradient on the fields", cr_tape_gradient(t, y, fv, p->nreal, gv),
              cr_ctx_errmsg(ev->ctx));
    /* walk the tangent along each slot's path */
    for (size_t i = 0; i < p->ns; i++) {
        const slot *sl = &p->s[i];
        cr_tangent f = tan;
        char path[24];
        memcpy(path, sl->path, sizeof path);
        for (char *tok = strtok(path, "."); tok != NULL && f.tag == CR_TAN_STRUCT;
             tok = strtok(NULL, ".")) {
            cr_tangent g;
            if (cr_tangent_getfield(f, tok, &g) != CR_OK) {
                ck_fail(c, "raw tangent: no field %s in %s", tok, sl->path);
                f.tag = CR_TAN_NOTIMPL;
                break;
            }
            f = g;
        }
        if (sl->kind == CR_KIND_F64) {
            size_t k = 0;
            while (p->real[k] != i)
                k++;
            if (f.tag != CR_TAN_F64 || f.u.f64 != read_real(grad, sl) || f.u.f64 != gv[k])
                ck_fail(c, "raw tangent %s: tag %d value %.17g, friendly %.17g, gradient %.17g",
                        sl->path, f.tag, f.u.f64, read_real(grad, sl), gv[k]);
        } else if (sl->kind == CR_KIND_F32) {
            size_t k = 0;
            while (p->real[k] != i)
                k++;
            if (f.tag != CR_TAN_F32 || (double)f.u.f32 != read_real(grad, sl) ||
                f.u.f32 != (float)gv[k])
                ck_fail(c, "raw tangent %s: tag %d value %.9g, friendly %.9g, gradient %.17g",
                        sl->path, f.tag, (double)f.u.f32, read_real(grad, sl), gv[k]);
        } else if (sl->kind == CR_KIND_ARRAY) {
            const afield *a = &p->af[sl->arr];
            if (!arrays) {
                if (!cr_tangent_is_zero(f))
                    ck_fail(c, "raw tangent %s: tag %d, not ZeroTangent", sl->path, f.tag);
                continue;
            }
            if (f.tag != CR_TAN_ARRAY || f.u.arr->dtype != a->dt || f.u.arr->ndim != a->ndim ||
                f.u.arr->shape[0] != a->shape[0] ||
                (a->ndim == 2 && f.u.arr->shape[1] != a->shape[1])) {
                ck_fail(c, "raw tangent %s: tag %d, not an array of the field's shape and dtype",
                        sl->path, f.tag);
                continue;
            }
            /* against the friendly destination and cr_tape_gradient_arrays by path */
            double gb[MAXLEN];
            cr_array G = a->ndim == 1 ? cr_array_vector(gb, a->numel)
                                      : cr_array_matrix(gb, a->shape[0], a->shape[1]);
            cr_array *gp = &G;
            cr_avar X = cr_tape_struct_array_field(p->type, avars, sl->path);
            ck_status(c, "cr_tape_gradient_arrays on the field",
                      cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp),
                      cr_ctx_errmsg(ev->ctx));
            cr_array D = view(a->dbuf, a->dstart, a->ddt, a->dndim, a->dshape, a->dstrides);
            bool exact = a->dt == CR_DT_F64 && a->ddt == CR_DT_F64;
            for (size_t e = 0; e < a->numel; e++) {
                double r = arr_get(f.u.arr, e), fr = arr_get(&D, e);
                double tol = exact ? 0 : 1e-6 * fmax(1.0, fabs(gb[e]));
                if (!(fabs(r - fr) <= tol) || !(fabs(r - gb[e]) <= (a->dt == CR_DT_F64 ? 0 : tol)))
                    ck_fail(c, "raw tangent %s[%zu] = %.17g, friendly %.17g, gradient %.17g",
                            sl->path, e, r, fr, gb[e]);
            }
        } else if (f.tag != CR_TAN_NONE) {
            ck_fail(c, "raw tangent %s: tag %d, not NoTangent", sl->path, f.tag);
        }
    }
    cr_arena_reset(ev->arena);
}

/* The bytes of grad and of its destination buffers. */
typedef struct snapshot {
    unsigned char obj[sizeof(p_top) + 64];
    double data[MAXARR][2 * MAXLEN * 3 + 8];
} snapshot;

static void take(const prog *p, const unsigned char *grad, snapshot *s)
{
    memcpy(s->obj, grad, p->type->size);
    for (size_t j = 0; j < p->narr; j++)
        memcpy(s->data[j], p->af[j].dbuf, p->af[j].dcount * dtsize(p->af[j].ddt));
}

static bool same_struct(const prog *p, const unsigned char *grad, const snapshot *s)
{
    return memcmp(s->obj, grad, p->type->size) == 0;
}

static bool same_data(const prog *p, const snapshot *s)
{
    for (size_t j = 0; j < p->narr; j++)
        if (memcmp(s->data[j], p->af[j].dbuf, p->af[j].dcount * dtsize(p->af[j].ddt)) != 0)
            return false;
    return true;
}

/* A struct gradient on t, arrays or not. */
static cr_status grad_call(const prog *p, cr_tape *t, cr_var y, const cr_var *vars,
                           const cr_avar *avars, void *grad, bool arrays)
{
    return arrays ? cr_tape_gradient_struct_arrays(t, y, p->type, vars, avars, grad)
                  : cr_tape_gradient_struct(t, y, p->type, vars, grad);
}

/* 4. Errors reported on the context: the tape stays usable, grad is left as it was (its
 * arrays' data too, for refusals before the sweep), and the gradient is then the same. */
static void check_errors(ck *c, env *ev, const prog *p, uint64_t *s, cr_var y, const cr_var *vars,
                         const cr_avar *avars, unsigned char *grad, const snapshot *good)
{
    cr_tape *t = ev->t;
    snapshot before;
    /* a destination array field without data */
    if (p->narr > 0 && rnd_unit(s) < 0.5) {
        const afield *a = &p->af[rnd_below(s, p->narr)];
        const slot *sl = &p->s[a->slot];
        dest_struct(p, grad);
        cr_array *d = (cr_array *)(void *)(grad + sl->off);
        d->data = NULL;
        take(p, grad, &before);
        cr_status st = cr_tape_gradient_struct_arrays(t, y, p->type, vars, avars, grad);
        char sub[96];
        snprintf(sub, sizeof sub, "the array field %s of %s in grad has no data", sl->fname,
                 sl->owner);
        ck_refused_with(c, "a destination without data", st, CR_EINVAL, cr_ctx_errmsg(ev->ctx),
                        sub);
        if (!same_struct(p, grad, &before) || !same_data(p, &before))
            ck_fail(c, "a destination without data: grad was written");
        ev->err_nodata++;
    }
    /* a destination of another size */
    if (p->narr > 0 && rnd_unit(s) < 0.5) {
        const afield *a = &p->af[rnd_below(s, p->narr)];
        const slot *sl = &p->s[a->slot];
        double other[MAXLEN + 1];
        dest_struct(p, grad);
        size_t m = a->numel > 1 && rnd_unit(s) < 0.5 ? a->numel - 1 : a->numel + 1;
        cr_array bad = cr_array_vector(other, m);
        memcpy(grad + sl->off, &bad, sizeof bad);
        take(p, grad, &before);
        cr_status st = cr_tape_gradient_struct_arrays(t, y, p->type, vars, avars, grad);
        ck_refused_with(c, "a destination of another size", st, CR_ESHAPE, cr_ctx_errmsg(ev->ctx),
                        "gradient array");
        if (!same_struct(p, grad, &before))
            ck_fail(c, "a destination of another size: grad's fields were written");
        ev->err_size++;
    }
    /* paths that name no real or array field */
    if (p->ns > 0) {
        const slot *sl = &p->s[rnd_below(s, p->ns)];
        char bad[40];
        const char *forms[4] = {"%s.x", "%s_", "zz.%s", "%s."};
        snprintf(bad, sizeof bad, forms[rnd_below(s, 4)], sl->path);
        cr_var v = cr_tape_struct_field(p->type, vars, bad);
        cr_avar av = cr_tape_struct_array_field(p->type, avars, bad);
        if (!(isnan(v.v) && v.idx == CR_VAR_CONST) || av.a != NULL || av.idx != CR_VAR_CONST)
            ck_fail(c, "the path %s was found", bad);
        /* a field of the other group, or a struct */
        bool real = sl->kind == CR_KIND_F64 || sl->kind == CR_KIND_F32;
        v = cr_tape_struct_field(p->type, vars, sl->path);
        av = cr_tape_struct_array_field(p->type, avars, sl->path);
        if (real == isnan(v.v) || (sl->kind == CR_KIND_ARRAY) != (av.a != NULL))
            ck_fail(c, "the path %s found the wrong kind of field", sl->path);
        const char *dot = strrchr(sl->path, '.');
        if (dot != NULL) {
            char st[24];
            memcpy(st, sl->path, (size_t)(dot - sl->path));
            st[dot - sl->path] = '\0';
            if (!isnan(cr_tape_struct_field(p->type, vars, st).v) ||
                cr_tape_struct_array_field(p->type, avars, st).a != NULL)
                ck_fail(c, "the struct path %s was found as a field", st);
        }
        if (cr_tape_status(t) != CR_OK)
            ck_fail(c, "a path lookup changed the tape's status");
        ev->err_path++;
    }
    /* a variable of the previous recording among the inputs */
    if (ev->have_prev && p->nreal > 0 && rnd_unit(s) < 0.5) {
        cr_var old[MAXSLOTS];
        memcpy(old, vars, p->nreal * sizeof *vars);
        old[rnd_below(s, p->nreal)] = ev->prev_var;
        dest_struct(p, grad);
        take(p, grad, &before);
        bool arrays = p->narr > 0 && rnd_unit(s) < 0.5;
        cr_status st = grad_call(p, t, y, old, avars, grad, arrays);
        ck_refused_with(c, "a variable of the previous recording", st, CR_ETAPE,
                        cr_ctx_errmsg(ev->ctx), "before its last reset");
        if (!same_struct(p, grad, &before))
            ck_fail(c, "a variable of the previous recording: grad was written");
        cr_tangent tan;
        st = cr_tape_gradient_tangent(t, y, p->type, old, ev->arena, &tan);
        ck_refused_with(c, "a variable of the previous recording (raw)", st, CR_ETAPE,
                        cr_ctx_errmsg(ev->ctx), "before its last reset");
        ev->err_old++;
    }
    if (ev->have_prev_avar && p->narr > 0 && rnd_unit(s) < 0.5) {
        cr_avar old[MAXARR];
        memcpy(old, avars, p->narr * sizeof *avars);
        old[rnd_below(s, p->narr)] = ev->prev_avar;
        dest_struct(p, grad);
        take(p, grad, &before);
        cr_status st = cr_tape_gradient_struct_arrays(t, y, p->type, vars, old, grad);
        ck_refused_with(c, "an array variable of the previous recording", st, CR_ETAPE,
                        cr_ctx_errmsg(ev->ctx), "before its last reset");
        if (!same_struct(p, grad, &before) || !same_data(p, &before))
            ck_fail(c, "an array variable of the previous recording: grad was written");
        cr_tangent tan;
        st = cr_tape_gradient_tangent_arrays(t, y, p->type, vars, old, ev->arena, &tan);
        ck_refused_with(c, "an array variable of the previous recording (raw)", st, CR_ETAPE,
                        cr_ctx_errmsg(ev->ctx), "before its last reset");
        cr_arena_reset(ev->arena);
        ev->err_old_array++;
    }
    /* none of these failed the tape: the same call gives the same gradient */
    if (cr_tape_status(t) != CR_OK)
        ck_fail(c, "an error of the arguments failed the tape: %s", cr_tape_errmsg(t));
    dest_struct(p, grad);
    ck_status(c, "the gradient after the errors",
              cr_tape_gradient_struct_arrays(t, y, p->type, vars, avars, grad),
              cr_ctx_errmsg(ev->ctx));
    if (!same_struct(p, grad, good) || !same_data(p, good))
        ck_fail(c, "the gradient after the errors differs");
}

/* 4. One failure that is the tape's: sticky until the reset. */
static void check_sticky(ck *c, env *ev, const prog *p, uint64_t *s, unsigned char *grad)
{
    cr_tape *t = ev->t;
    cr_var vars[MAXSLOTS];
    cr_avar avars[MAXARR];
    int kind = (int)rnd_below(s, 3);
    cr_status want = CR_EINVAL;
    if (kind == 0 && !ev->have_prev)
        kind = 2;
    if (kind == 1 && p->narr == 0)
        kind = 2;
    if (kind == 2 && p->nreal == 0)
        kind = ev->have_prev ? 0 : -1;
    if (kind < 0)
        return;
    cr_tape_reset(t);
    if (kind == 0) { /* a variable of the previous recording in an operation */
        (void)cr_tape_struct_inputs(t, p->type, p->obj, vars, MAXSLOTS);
        cr_var r = cr_add(t, ev->prev_var, cr_const(1.0));
        want = CR_ETAPE;
        if (!isnan(r.v))
            ck_fail(c, "a variable of the previous recording gave a number");
    } else if (kind == 1) { /* a struct whose array field holds integers */
        const afield *a = &p->af[rnd_below(s, p->narr)];
        unsigned char *copy = malloc(p->type->size);
        assert_non_null(copy);
        memcpy(copy, p->obj, p->type->size);
        int64_t ib[2] = {1, 2};
        size_t n2 = 2;
        cr_array ia;
        assert_int_equal(cr_array_view_init(&ia, ib, CR_DT_I64, 1, &n2, NULL), CR_OK);
        memcpy(copy + p->s[a->slot].off, &ia, sizeof ia);
        cr_status st = cr_tape_struct_array_inputs(t, p->type, copy, avars, MAXARR);
        ck_refused_with(c, "an integer array field", st, CR_EINVAL, cr_tape_errmsg(t),
                        "not a float array");
        free(copy);
    } else { /* too little room for the inputs */
        cr_status st = cr_tape_struct_inputs(t, p->type, p->obj, vars, p->nreal - 1);
        char sub[64];
        snprintf(sub, sizeof sub, "%s has %zu real fields, room for %zu", p->type->name, p->nreal,
                 p->nreal - 1);
        ck_refused_with(c, "too little room", st, CR_EINVAL, cr_tape_errmsg(t), sub);
    }
    ev->sticky[kind]++;
    if (cr_tape_status(t) != want || cr_tape_errmsg(t)[0] == '\0')
        ck_fail(c, "sticky %d: the tape's status is %s", kind, cr_status_str(cr_tape_status(t)));
    /* later work fails with it, and leaves grad alone */
    cr_status st = cr_tape_struct_inputs(t, p->type, p->obj, vars, MAXSLOTS);
    if (st != want)
        ck_fail(c, "sticky %d: inputs after the failure gave %s", kind, cr_status_str(st));
    cr_var y = p->nreal > 0 ? cr_mul(t, vars[0], vars[0]) : cr_const(1.0);
    dest_struct(p, grad);
    snapshot before;
    take(p, grad, &before);
    st = grad_call(p, t, y, vars, avars, grad, false);
    if (st != want || !same_struct(p, grad, &before))
        ck_fail(c, "sticky %d: the struct gradient gave %s or wrote grad", kind, cr_status_str(st));
    cr_tape_reset(t);
    if (cr_tape_status(t) != CR_OK)
        ck_fail(c, "sticky %d: the reset did not clear it", kind);
}

static void run_seed(env *ev, uint64_t seed)
{
    prog *p = calloc(1, sizeof *p);
    assert_non_null(p);
    gen_prog(p, seed);
    ck c = {.p = p, .seed = seed, .test = "test_tape_random_struct", .mode = "struct"};
    if (getenv("CR_RANDOM_DUMP") != NULL)
        dump_prog(p);
    uint64_t s = seed ^ 0x6a09e667f3bcc909u;
    double g[MAXSLOTS + MAXARR * MAXLEN], err[MAXSLOTS + MAXARR * MAXLEN];
    reference(p, g, err);
    unsigned char *grad = malloc(p->type->size);
    assert_non_null(grad);
    snapshot *good = malloc(sizeof *good);
    assert_non_null(good);

    /* 5. The same tape for every program: the previous program's inputs are refused. */
    cr_tape *t = ev->t;
    cr_var vars[MAXSLOTS];
    cr_avar avars[MAXARR];
    cr_var y = record(&c, p, t, vars, avars, &s);
    double yi = interp(p, p->x);
    if (!(fabs(y.v - yi) <= (p->f32 ? 1e-5 : 1e-12) * fmax(1.0, fabs(yi))))
        ck_fail(&c, "value: tape %.17g, interpreter %.17g", y.v, yi);

    /* 1. The friendly gradient, with and without the array fields. */
    bool arrays = p->narr > 0 ? rnd_unit(&s) < 0.8 : rnd_unit(&s) < 0.5;
    c.mode = arrays ? "cr_tape_gradient_struct_arrays" : "cr_tape_gradient_struct";
    dest_struct(p, grad);
    ck_status(&c, "friendly gradient", grad_call(p, t, y, vars, avars, grad, arrays),
              cr_ctx_errmsg(ev->ctx));
    check_friendly(&c, p, grad, g, err, arrays, false, 1.0);
    ev->fields += p->nreal;
    ev->elements += arrays ? p->nx - p->nreal : 0;

    /* 2. The raw tangent. */
    c.mode = "raw tangent";
    check_raw(&c, ev, p, t, y, vars, avars, grad, arrays);

    /* 4. Errors of the arguments. */
    c.mode = "errors";
    dest_struct(p, grad);
    ck_status(&c, "friendly gradient",
              cr_tape_gradient_struct_arrays(t, y, p->type, vars, avars, grad),
              cr_ctx_errmsg(ev->ctx));
    take(p, grad, good);
    check_errors(&c, ev, p, &s, y, vars, avars, grad, good);

    /* 3. The customised conversion, on a tape of its engine (reused too). */
    c.mode = "customised";
    conv_state *cs = &ev->cs[p->conv];
    cr_tape *tc = ev->tc[p->conv];
    cr_var cvars[MAXSLOTS];
    cr_avar cavars[MAXARR];
    cr_var cy = record(&c, p, tc, cvars, cavars, &s);
    static const double scales[4] = {2.0, -0.5, 3.0, 0.25};
    cs->c = scales[rnd_below(&s, 4)];
    cs->arrays = p->narr > 0 ? rnd_unit(&s) < 0.7 : rnd_unit(&s) < 0.5;
    cs->calls = cs->bad = 0;
    if (p->nconv > 0 && rnd_unit(&s) < 0.3) { /* a conversion that fails */
        cs->fail = true;
        dest_struct(p, grad);
        snapshot before;
        take(p, grad, &before);
        cr_status st = grad_call(p, tc, cy, cvars, cavars, grad, cs->arrays);
        char sub[64];
        snprintf(sub, sizeof sub, "the friendly gradient of %s failed", cs->type->name);
        ck_refused_with(&c, "a failing conversion", st, CR_EDOMAIN, cr_ctx_errmsg(ev->ctx), sub);
        if (!same_struct(p, grad, &before))
            ck_fail(&c, "a failing conversion changed grad");
        if (cs->calls != 1)
            ck_fail(&c, "a failing conversion was called %zu times", cs->calls);
        if (cr_tape_status(tc) != CR_OK)
            ck_fail(&c, "a failing conversion failed the tape");
        cs->fail = false;
        cs->calls = 0;
        ev->conv_failed++;
    }
    dest_struct(p, grad);
    ck_status(&c, "converted gradient", grad_call(p, tc, cy, cvars, cavars, grad, cs->arrays),
              cr_ctx_errmsg(ev->ctx));
    if (cs->calls != p->nconv || cs->bad != 0)
        ck_fail(&c, "the conversion of %s: %zu calls for %zu occurrences; %zu bad (%s)",
                cs->type->name, cs->calls, p->nconv, cs->bad, cs->bad ? cs->why : "");
    check_friendly(&c, p, grad, g, err, cs->arrays, true, cs->c);
    ev->converted += p->nconv;

    /* 4. A failure of the tape: sticky. Then this program's variables become the previous
     * recording's (its arrays are freed below). */
    c.mode = "sticky";
    y = record(&c, p, t, vars, avars, &s);
    ev->have_prev = p->nreal > 0;
    if (ev->have_prev)
        ev->prev_var = vars[rnd_below(&s, p->nreal)];
    ev->have_prev_avar = p->narr > 0;
    if (p->narr > 0)
        ev->prev_avar = avars[rnd_below(&s, p->narr)];
    check_sticky(&c, ev, p, &s, grad);
    (void)y;

    if (c.failed != 0 && getenv("CR_RANDOM_DUMP") == NULL)
        dump_prog(p);
    free(good);
    free(grad);
    free_prog(p);
    free(p);
    ev->programs++;
    assert_int_equal(c.failed, 0);
}

/* ---- Driver ---------------------------------------------------------------------------------- */

static int env_setup(void **state)
{
    env *ev = calloc(1, sizeof *ev);
    if (ev == NULL || cr_ctx_new(NULL, &ev->ctx) != CR_OK ||
        cr_arena_new(ev->ctx, NULL, &ev->arena) != CR_OK ||
        cr_tape_new(ev->ctx, NULL, &ev->t) != CR_OK)
        return -1;
    for (size_t k = 0; k < NCONV; k++) {
        ev->cs[k].type = k_conv_types[k];
        cr_tape_params tp = {.struct_size = sizeof tp};
        if (cr_engine_new(ev->ctx, NULL, &ev->eng[k]) != CR_OK ||
            cr_engine_friendly(ev->eng[k], k_conv_types[k], conv_fn, &ev->cs[k]) != CR_OK)
            return -1;
        tp.engine = ev->eng[k];
        if (cr_tape_new(ev->ctx, &tp, &ev->tc[k]) != CR_OK)
            return -1;
    }
    *state = ev;
    return 0;
}

static int env_teardown(void **state)
{
    env *ev = *state;
    for (size_t k = 0; k < NCONV; k++) {
        cr_tape_free(ev->tc[k]);
        cr_engine_free(ev->eng[k]);
    }
    cr_tape_free(ev->t);
    cr_arena_free(ev->arena);
    cr_ctx_free(ev->ctx);
    free(ev);
    return 0;
}

static void test_random_struct_programs(void **state)
{
    env *ev = *state;
    uint64_t one = replay_seed();
    if (one != 0) {
        run_seed(ev, one);
        return;
    }
    size_t n = programs(2000);
    size_t from = programs_from();
    for (size_t i = from; i < from + n; i++) {
        uint64_t s = 0x57c7u * 0x100000000u + i;
        run_seed(ev, rnd_next(&s) | 1);
    }
    if (getenv("CR_RANDOM_PROGRAMS") != NULL)
        printf("%zu programs: %zu real fields and %zu array elements against differences; "
               "%zu converted structs, %zu failing conversions; errors: %zu without data, %zu "
               "of another size, %zu paths, %zu old variables, %zu old array variables; "
               "sticky: %zu old variables in an operation, %zu integer array fields, %zu short "
               "of room\n",
               ev->programs, ev->fields, ev->elements, ev->converted, ev->conv_failed,
               ev->err_nodata, ev->err_size, ev->err_path, ev->err_old, ev->err_old_array,
               ev->sticky[0], ev->sticky[1], ev->sticky[2]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_struct_programs),
    };
    return cmocka_run_group_tests(tests, env_setup, env_teardown);
}
