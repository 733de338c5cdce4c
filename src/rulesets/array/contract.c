/*
 * einsum: the contraction of one or two arrays described by an index spec ("ij,jk->ik",
 * "bij,bjk->bik", "ii->i", "ij->"), with its frule, rrule, second-order class and test
 * registration.
 *
 * A spec names each operand's dimensions with index letters; every index takes every value
 * of its extent, the product of the operands' elements at those indices is added into the
 * output element the output's letters name, so an index absent from the output is summed.
 * A letter repeated inside one operand reads its diagonal ("ii->i"); repeated in the
 * output, it writes one ("i->ii", a diagonal matrix); without "->" the output is the
 * letters used exactly once, in ASCII order (NumPy's implicit form). The result is always
 * an array (0-d for an empty output).
 *
 * The function is linear in each operand, so its derivatives are einsums of the same
 * indices: for y = einsum(a,b->o)(A, B), ẏ = einsum(Ȧ, B) + einsum(A, Ḃ),
 * Ā = einsum(o,b->a)(Ȳ, conj B), B̄ = einsum(a,o->b)(conj A, Ȳ); with one operand,
 * Ā = einsum(o->a)(Ȳ). An index of an operand that is in neither the other operand nor
 * the output (summed away by the forward einsum) is broadcast back by the pullback's
 * einsum, whose output then has a letter of no operand: internally the extents come from
 * the forward call, so every term is one kernel.
 *
 * The kernel: two operands whose letters are each used once per term, every letter of an
 * operand also in the other or in the output, go through BLAS gemm, one call per batch
 * index (the letters in both operands and the output are the batch, those in both
 * operands only the contraction): the operands are copied into [batch, rows, inner]
 * order unless already in it (or in its transpose, which gemm reads as such), the result
 * permuted into the output's order. Anything else (one operand, diagonals, indices summed
 * inside one operand) is a loop over every combination of the indices.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>

#include "../array_impl.h"
#include "contract.h"

#include "../../core/checked.h"

const cr_type cr_einsum_spec_type = {"cr_einsum_spec", sizeof(cr_einsum_spec), 0, NULL};

/* Letters a-z and A-Z. */
#define EIN_NLET 52

typedef struct ein_term {
    size_t n;                       /* number of letters */
    uint8_t lab[CR_ARRAY_MAX_DIMS]; /* label ids */
    size_t pos[CR_ARRAY_MAX_DIMS];  /* position of each letter in the spec, for messages */
} ein_term;

/* A parsed spec: terms 0 .. nin-1 the operands', term 2 the output's; labels numbered in
 * order of first appearance, with their letters and (once bound to arrays) extents. */
typedef struct ein {
    size_t nin;
    ein_term t[3];
    size_t nlab;
    char let[EIN_NLET];
    size_t ext[EIN_NLET];
} ein;

enum { OUT = 2 };

static int letter_id(char c)
{
    if (c >= 'a' && c <= 'z')
        return c - 'a';
    if (c >= 'A' && c <= 'Z')
        return 26 + (c - 'A');
    return -1;
}

/* A character for a message: the character, or its code when it is not printable. */
static const char *show_char(char c, char *buf, size_t size)
{
    if (isprint((unsigned char)c))
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02x", (unsigned)(unsigned char)c);
    return buf;
}

/* Parse spec into e (labels, terms; no extents). nops: the number of operands given. */
static cr_status ein_parse(cr_arena *arena, const char *spec, size_t nops, ein *e)
{
    memset(e, 0, sizeof *e);
    if (spec == NULL)
        return CR__FAIL(arena, CR_EINVAL, "einsum: the spec is a NULL string");
    int ids[EIN_NLET];
    size_t count[EIN_NLET] = {0};
    for (int i = 0; i < EIN_NLET; i++)
        ids[i] = -1;
    size_t term = 0;
    bool arrow = false;
    e->nin = 1;
    char cb[24];
    for (size_t i = 0; spec[i] != '\0'; i++) {
        char c = spec[i];
        int l = letter_id(c);
        if (l >= 0) {
            ein_term *t = &e->t[term];
            if (t->n == CR_ARRAY_MAX_DIMS)
                return CR__FAIL(arena, CR_EINVAL,
                                "einsum: spec \"%s\": %s at position %zu gives %s more than %d "
                                "indices",
                                spec, show_char(c, cb, sizeof cb), i,
                                term == OUT ? "the output"
                                : term == 0 ? "operand 0"
                                            : "operand 1",
                                CR_ARRAY_MAX_DIMS);
            if (ids[l] < 0) {
                ids[l] = (int)e->nlab;
                e->let[e->nlab++] = c;
            }
            t->pos[t->n] = i;
            t->lab[t->n++] = (uint8_t)ids[l];
            if (term != OUT)
                count[ids[l]]++;
        } else if (c == ',') {
            if (arrow)
                return CR__FAIL(arena, CR_EINVAL,
                                "einsum: spec \"%s\": ',' at position %zu is in the output", spec,
                                i);
            if (e->nin == 2)
                return CR__FAIL(arena, CR_EINVAL,
                                "einsum: spec \"%s\": ',' at position %zu starts a third operand "
                                "(at most 2)",
                                spec, i);
            e->nin = 2;
            term = 1;
        } else if (c == '-' && spec[i + 1] == '>') {
            if (arrow)
                return CR__FAIL(arena, CR_EINVAL,
                                "einsum: spec \"%s\": a second \"->\" at position %zu", spec, i);
            arrow = true;
            term = OUT;
            i++;
        } else {
            return CR__FAIL(arena, CR_EINVAL,
                            "einsum: spec \"%s\": %s at position %zu is not an index letter "
                            "(a-z, A-Z), ',' or \"->\"",
                            spec, show_char(c, cb, sizeof cb), i);
        }
    }
    if (e->nin != nops)
        return CR__FAIL(arena, CR_EINVAL, "einsum: spec \"%s\" has %zu operand%s, %zu given", spec,
                        e->nin, CR__S(e->nin), nops);
    if (!arrow) { /* implicit output: the letters used once, in ASCII order */
        for (int c = 0; c < 128; c++) {
            int l = letter_id((char)c);
            if (l >= 0 && ids[l] >= 0 && count[ids[l]] == 1) {
                if (e->t[OUT].n == CR_ARRAY_MAX_DIMS)
                    return CR__FAIL(arena, CR_EINVAL,
                                    "einsum: spec \"%s\": an implicit output of more than %d "
                                    "indices",
                                    spec, CR_ARRAY_MAX_DIMS);
                e->t[OUT].pos[e->t[OUT].n] = 0;
                e->t[OUT].lab[e->t[OUT].n++] = (uint8_t)ids[l];
            }
        }
        return CR_OK;
    }
    for (size_t k = 0; k < e->t[OUT].n; k++)
        if (count[e->t[OUT].lab[k]] == 0)
            return CR__FAIL(arena, CR_EINVAL,
                            "einsum: spec \"%s\": output index '%c' at position %zu is in no "
                            "operand",
                            spec, e->let[e->t[OUT].lab[k]], e->t[OUT].pos[k]);
    return CR_OK;
}

/* Bind the operands' extents to the labels (CR_ESHAPE when a rank or an extent disagrees). */
static cr_status ein_bind(cr_arena *arena, const char *spec, ein *e, const cr_array *const *ops)
{
    bool set[EIN_NLET] = {false};
    size_t from_op[EIN_NLET] = {0}, from_dim[EIN_NLET] = {0};
    for (size_t k = 0; k < e->nin; k++) {
        const ein_term *t = &e->t[k];
        if (ops[k]->ndim != t->n)
            return CR__FAIL(arena, CR_ESHAPE,
                            "einsum: spec \"%s\": operand %zu has %u dimension%s but %zu "
                            "ind%s",
                            spec, k, (unsigned)ops[k]->ndim, CR__S(ops[k]->ndim), t->n,
                            t->n == 1 ? "ex" : "ices");
        for (size_t d = 0; d < t->n; d++) {
            size_t l = t->lab[d], x = ops[k]->shape[d];
            if (!set[l]) {
                set[l] = true;
                e->ext[l] = x;
                from_op[l] = k;
                from_dim[l] = d;
            } else if (e->ext[l] != x) {
                return CR__FAIL(arena, CR_ESHAPE,
                                "einsum: spec \"%s\": index '%c' has extent %zu in operand %zu "
                                "(dimension %zu) and %zu in operand %zu (dimension %zu)",
                                spec, e->let[l], e->ext[l], from_op[l], from_dim[l], x, k, d);
            }
        }
    }
    return CR_OK;
}

/* The output's shape. */
static void ein_out_shape(const ein *e, size_t *shape)
{
    for (size_t d = 0; d < e->t[OUT].n; d++)
        shape[d] = e->ext[e->t[OUT].lab[d]];
}

/* ---- The kernel ---------------------------------------------------------------------------- */

/* Element strides of term k's array (contiguous row-major of the term's extents) summed per
 * label: offset of an index assignment = Σ_l idx[l] st[l]. */
static void label_strides(const ein *e, size_t k, ptrdiff_t *st)
{
    const ein_term *t = &e->t[k];
    size_t shape[CR_ARRAY_MAX_DIMS];
    ptrdiff_t s[CR_ARRAY_MAX_DIMS];
    for (size_t d = 0; d < t->n; d++)
        shape[d] = e->ext[t->lab[d]];
    cr__row_major(t->n, shape, s);
    for (size_t l = 0; l < e->nlab; l++)
        st[l] = 0;
    for (size_t d = 0; d < t->n; d++)
        st[t->lab[d]] += s[d];
}

/* Inside ein_loop: y[off[2] + i s2] += a[off[0] + i s0] (times b[off[1] + i s1] for two
 * operands) along the inner label, elements of type T. i is below the last label's extent and
 * s0, s1, s2 its summed strides in the operands and the output (contiguous arrays that exist,
 * the output's element count checked when it was made): each product is an offset inside one. */
#define EIN_INNER(T)                                                       \
    do {                                                                   \
        const T *a = ops[0]->data, *b = e->nin == 2 ? ops[1]->data : NULL; \
        T *y = out->data;                                                  \
        for (size_t i = 0; i < inner; i++) {                               \
            ptrdiff_t ii = (ptrdiff_t)i;                                   \
            T v = a[off[0] + ii * s0];                                     \
            if (b != NULL)                                                 \
                v *= b[off[1] + ii * s1];                                  \
            y[off[2] + ii * s2] += v;                                      \
        }                                                                  \
    } while (0)

/* out (contiguous, zeroed) += the einsum of ops (contiguous, work dtype), every index
 * combination visited: the last label is the inner loop. */
static void ein_loop(const ein *e, cr_dtype wdt, const cr_array *const *ops, cr_array *out)
{
    ptrdiff_t st[3][EIN_NLET];
    size_t nl = e->nlab;
    for (size_t l = 0; l < nl; l++)
        if (e->ext[l] == 0)
            return; /* no combination: the zero output */
    label_strides(e, 0, st[0]);
    if (e->nin == 2)
        label_strides(e, 1, st[1]);
    else
        memset(st[1], 0, sizeof st[1]);
    label_strides(e, OUT, st[2]);
    size_t idx[EIN_NLET] = {0};
    ptrdiff_t off[3] = {0, 0, 0};
    size_t inner = nl > 0 ? e->ext[nl - 1] : 1;
    ptrdiff_t s0 = nl > 0 ? st[0][nl - 1] : 0, s1 = nl > 0 ? st[1][nl - 1] : 0,
              s2 = nl > 0 ? st[2][nl - 1] : 0;
    for (;;) {
        if (wdt == CR_DT_C128)
            EIN_INNER(cr_complex);
        else
            EIN_INNER(double);
        /* the next combination of the outer labels */
        size_t l = nl > 0 ? nl - 1 : 0;
        for (;;) {
            if (l == 0)
                return;
            l--;
            idx[l]++;
            for (int k = 0; k < 3; k++)
                off[k] += st[k][l];
            if (idx[l] < e->ext[l])
                break;
            for (int k = 0; k < 3; k++)
                off[k] -= (ptrdiff_t)idx[l] * st[k][l];
            idx[l] = 0;
        }
    }
}

/* A contiguous copy of the contiguous array a of `ndim` dimensions read in the order perm
 * (dimension d of the copy is dimension perm[d] of a). */
static cr_status permuted(cr_arena *arena, cr_dtype wdt, const cr_array *a, const size_t *perm,
                          cr_array **out)
{
    size_t nd = a->ndim, shape[CR_ARRAY_MAX_DIMS];
    ptrdiff_t sa[CR_ARRAY_MAX_DIMS], s[CR_ARRAY_MAX_DIMS];
    cr__row_major(nd, a->shape, sa);
    for (size_t d = 0; d < nd; d++) {
        shape[d] = a->shape[perm[d]];
        s[d] = sa[perm[d]];
    }
    cr_status st = cr__new(arena, wdt, nd, shape, false, out);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(*out);
    if (n == 0)
        return CR_OK;
    size_t idx[CR_ARRAY_MAX_DIMS] = {0};
    ptrdiff_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (wdt == CR_DT_C128)
            ((cr_complex *)(*out)->data)[i] = ((const cr_complex *)a->data)[off];
        else
            ((double *)(*out)->data)[i] = ((const double *)a->data)[off];
        for (size_t d = nd; d-- > 0;) {
            idx[d]++;
            off += s[d];
            if (idx[d] < shape[d])
                break;
            off -= (ptrdiff_t)idx[d] * s[d];
            idx[d] = 0;
        }
    }
    return CR_OK;
}

/* Whether e fits the batched-gemm path: two operands, no letter twice in a term, every
 * letter of an operand in the other operand or in the output. */
static bool gemm_fits(const ein *e)
{
    if (e->nin != 2)
        return false;
    bool in[3][EIN_NLET] = {{false}};
    for (size_t k = 0; k < 3; k++)
        for (size_t d = 0; d < e->t[k].n; d++) {
            if (in[k][e->t[k].lab[d]])
                return false;
            in[k][e->t[k].lab[d]] = true;
        }
    for (size_t l = 0; l < e->nlab; l++)
        if ((in[0][l] && !in[1][l] && !in[OUT][l]) || (in[1][l] && !in[0][l] && !in[OUT][l]) ||
            (in[OUT][l] && !in[0][l] && !in[1][l]))
            return false;
    return true;
}

/* The dimension of term k holding label l. */
static size_t dim_of(const ein *e, size_t k, size_t l)
{
    for (size_t d = 0; d < e->t[k].n; d++)
        if (e->t[k].lab[d] == l)
            return d;
    return 0;
}

/* Product of the extents of n labels, checked. */
static cr_status ext_prod(cr_arena *arena, const ein *e, const uint8_t *labs, size_t n, size_t *out)
{
    size_t p = 1;
    for (size_t i = 0; i < n; i++)
        if (!cr__mul_size(p, e->ext[labs[i]], &p))
            return CR__FAIL(arena, CR_EOVERFLOW, "einsum: the size of a product overflows");
    *out = p;
    return CR_OK;
}

/* An operand as a gemm operand per batch: in place when its dimensions are
 * [batch, g1, g2] (trans 0) or [batch, g2, g1] (trans 1), else a copy in [batch, g1, g2]
 * order. rows x cols of the stored matrix are returned in *m. */
static cr_status gemm_operand(cr_arena *arena, const ein *e, size_t k, cr_dtype wdt,
                              const cr_array *a, const uint8_t *batch, size_t nb, const uint8_t *g1,
                              size_t n1, const uint8_t *g2, size_t n2, size_t r1, size_t r2,
                              const void **data, cr__mat *m)
{
    size_t want[CR_ARRAY_MAX_DIMS], alt[CR_ARRAY_MAX_DIMS], nd = 0;
    for (size_t i = 0; i < nb; i++, nd++)
        want[nd] = alt[nd] = dim_of(e, k, batch[i]);
    for (size_t i = 0; i < n1; i++)
        want[nd + i] = dim_of(e, k, g1[i]);
    for (size_t i = 0; i < n2; i++)
        want[nd + n1 + i] = dim_of(e, k, g2[i]);
    for (size_t i = 0; i < n2; i++)
        alt[nd + i] = dim_of(e, k, g2[i]);
    for (size_t i = 0; i < n1; i++)
        alt[nd + n2 + i] = dim_of(e, k, g1[i]);
    bool id = true, tr = true;
    for (size_t d = 0; d < a->ndim; d++) {
        id = id && want[d] == d;
        tr = tr && alt[d] == d;
    }
    if (id || tr) {
        *data = a->data;
        *m = id ? (cr__mat){NULL, r1, r2, r2 ? r2 : 1, 0} : (cr__mat){NULL, r2, r1, r1 ? r1 : 1, 1};
        return CR_OK;
    }
    cr_array *c;
    cr_status st = permuted(arena, wdt, a, want, &c);
    if (st != CR_OK)
        return st;
    *data = c->data;
    *m = (cr__mat){NULL, r1, r2, r2 ? r2 : 1, 0};
    return CR_OK;
}

/* out = the einsum through batched gemm (gemm_fits). */
static cr_status ein_gemm(cr_arena *arena, const ein *e, cr_dtype wdt, const cr_array *const *ops,
                          cr_array **out)
{
    bool in[3][EIN_NLET] = {{false}};
    for (size_t k = 0; k < 3; k++)
        for (size_t d = 0; d < e->t[k].n; d++)
            in[k][e->t[k].lab[d]] = true;
    uint8_t batch[CR_ARRAY_MAX_DIMS], fa[CR_ARRAY_MAX_DIMS], fb[CR_ARRAY_MAX_DIMS],
        con[CR_ARRAY_MAX_DIMS];
    size_t nb = 0, nfa = 0, nfb = 0, nc = 0;
    for (size_t d = 0; d < e->t[OUT].n; d++) {
        uint8_t l = e->t[OUT].lab[d];
        if (in[0][l] && in[1][l])
            batch[nb++] = l;
        else if (in[0][l])
            fa[nfa++] = l;
        else
            fb[nfb++] = l;
    }
    for (size_t d = 0; d < e->t[0].n; d++) {
        uint8_t l = e->t[0].lab[d];
        if (in[1][l] && !in[OUT][l])
            con[nc++] = l;
    }
    /* B, M, N, K: the products of the extents of the four groups */
    size_t B = 0, M = 0, N = 0, K = 0;
    cr_status st;
    if ((st = ext_prod(arena, e, batch, nb, &B)) != CR_OK ||
        (st = ext_prod(arena, e, fa, nfa, &M)) != CR_OK ||
        (st = ext_prod(arena, e, fb, nfb, &N)) != CR_OK ||
        (st = ext_prod(arena, e, con, nc, &K)) != CR_OK)
        return st;
    /* C in [batch, fa, fb] order */
    size_t cshape[CR_ARRAY_MAX_DIMS], cnd = 0;
    uint8_t corder[CR_ARRAY_MAX_DIMS];
    for (size_t i = 0; i < nb; i++, cnd++)
        corder[cnd] = batch[i];
    for (size_t i = 0; i < nfa; i++, cnd++)
        corder[cnd] = fa[i];
    for (size_t i = 0; i < nfb; i++, cnd++)
        corder[cnd] = fb[i];
    for (size_t d = 0; d < cnd; d++)
        cshape[d] = e->ext[corder[d]];
    cr_array *C;
    st = cr__new(arena, wdt, cnd, cshape, K == 0, &C); /* gemm writes every element */
    if (st != CR_OK)
        return st;
    if (B > 0 && M > 0 && N > 0 && K > 0) {
        const void *da, *db;
        cr__mat ma, mb;
        st = gemm_operand(arena, e, 0, wdt, ops[0], batch, nb, fa, nfa, con, nc, M, K, &da, &ma);
        if (st == CR_OK)
            st =
                gemm_operand(arena, e, 1, wdt, ops[1], batch, nb, con, nc, fb, nfb, K, N, &db, &mb);
        if (st != CR_OK)
            return st;
        size_t el = cr_dtype_size(wdt), sa, sb, sc;
        if (!cr__mul_size(M, K, &sa) || !cr__mul_size(sa, el, &sa) || !cr__mul_size(K, N, &sb) ||
            !cr__mul_size(sb, el, &sb) || !cr__mul_size(M, N, &sc) || !cr__mul_size(sc, el, &sc))
            return CR__FAIL(arena, CR_EOVERFLOW, "einsum: the size of a product overflows");
        for (size_t b = 0; b < B; b++) {
            ma.data = (const char *)da + b * sa; /* b < B: the offsets are within the arrays */
            mb.data = (const char *)db + b * sb;
            cr__gemm(wdt, &ma, &mb, 1, 0, (char *)C->data + b * sc, N);
        }
    }
    size_t perm[CR_ARRAY_MAX_DIMS];
    bool id = true;
    for (size_t d = 0; d < e->t[OUT].n; d++) {
        for (size_t c = 0; c < cnd; c++)
            if (corder[c] == e->t[OUT].lab[d])
                perm[d] = c;
        id = id && perm[d] == d;
    }
    if (id) {
        *out = C;
        return CR_OK;
    }
    return permuted(arena, wdt, C, perm, out);
}

/* Whether every extent of the gemm path fits BLAS's int. */
static bool ints_fit(const ein *e)
{
    for (size_t k = 0; k < 3; k++) {
        size_t n = 1;
        for (size_t d = 0; d < e->t[k].n; d++)
            if (!cr__mul_size(n, e->ext[e->t[k].lab[d]], &n))
                return false;
        if (n > (size_t)INT_MAX)
            return false;
    }
    return true;
}

/* y = einsum of the dense work arrays ops (a new contiguous work array). */
static cr_status ein_eval(cr_arena *arena, const ein *e, cr_dtype wdt, const cr_array *const *ops,
                          cr_array **y)
{
    if (gemm_fits(e) && ints_fit(e))
        return ein_gemm(arena, e, wdt, ops, y);
    size_t shape[CR_ARRAY_MAX_DIMS], numel;
    ein_out_shape(e, shape);
    cr_status st =
        cr__ck_numel(cr_arena_ctx(arena), "einsum", e->t[OUT].n, shape, cr_dtype_size(wdt), &numel);
    if (st == CR_OK)
        st = cr__new(arena, wdt, e->t[OUT].n, shape, true, y);
    if (st != CR_OK)
        return st;
    ein_loop(e, wdt, ops, *y);
    return CR_OK;
}

/* The einsum whose terms are e's terms i, j (or i alone when j is 3) -> k. */
static ein ein_swap(const ein *e, size_t i, size_t j, size_t k)
{
    ein r = *e;
    r.nin = j == 3 ? 1 : 2;
    r.t[0] = e->t[i];
    if (j != 3)
        r.t[1] = e->t[j];
    else
        memset(&r.t[1], 0, sizeof r.t[1]);
    r.t[OUT] = e->t[k];
    return r;
}

/* A conjugated copy of a complex work array (a itself when real). */
static cr_status conj_of(cr_arena *arena, cr_dtype wdt, const cr_array *a, const cr_array **out)
{
    if (wdt != CR_DT_C128) {
        *out = a;
        return CR_OK;
    }
    cr_array *c;
    cr_status st = cr__new_like(arena, wdt, a, false, &c);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(a);
    for (size_t i = 0; i < n; i++)
        ((cr_complex *)c->data)[i] = conj(((const cr_complex *)a->data)[i]);
    *out = c;
    return CR_OK;
}

/* ---- The rules ------------------------------------------------------------------------------ */

typedef struct ein_env {
    ein e;
    const cr_array *op[2]; /* dense work arrays */
    cr_project *proj[2];
    cr_dtype wdt;
    size_t yshape[CR_ARRAY_MAX_DIMS];
} ein_env;

/* The forward pass: parse, bind, canonicalise, evaluate. */
/* Parse and compute the output: *y the einsum of the operands (in their promoted dtype), the
 * operands and the shapes in v. */
static cr_status ein_forward(cr_arena *arena, const cr_value *args, size_t nargs, ein_env *v,
                             cr_value *y)
{
    cr_status st = cr__nargs(arena, "einsum", nargs, 2, 3);
    if (st != CR_OK)
        return st;
    if (args[0].kind != CR_KIND_STRUCT || args[0].u.obj.type != &cr_einsum_spec_type ||
        args[0].u.obj.ptr == NULL)
        return CR__FAIL(arena, CR_EINVAL, "einsum: argument 0 is not a cr_einsum_spec");
    const cr_einsum_spec *s = args[0].u.obj.ptr;
    st = ein_parse(arena, s->spec, nargs - 1, &v->e);
    if (st != CR_OK)
        return st;
    const cr_array *raw[2] = {NULL, NULL};
    cr_dtype d = 0;
    for (size_t k = 0; k < v->e.nin; k++) {
        st = cr__array_arg(arena, "einsum", args, nargs, k + 1, &raw[k]);
        if (st != CR_OK)
            return st;
        if (!cr_dtype_is_float((cr_dtype)raw[k]->dtype))
            return CR__FAIL(arena, CR_EINVAL, "einsum: operand %zu is a %s array (float expected)",
                            k, cr_dtype_name((cr_dtype)raw[k]->dtype));
        d = cr__promote(d, (cr_dtype)raw[k]->dtype);
    }
    st = ein_bind(arena, s->spec, &v->e, raw);
    if (st != CR_OK)
        return st;
    v->wdt = cr__work(d);
    for (size_t k = 0; k < v->e.nin; k++) {
        st = cr__dense(arena, raw[k], v->wdt, &v->op[k]);
        if (st != CR_OK)
            return st;
    }
    ein_out_shape(&v->e, v->yshape);
    cr_array *w, *o;
    st = ein_eval(arena, &v->e, v->wdt, v->op, &w);
    if (st == CR_OK)
        st = cr__cast(arena, w, d, &o);
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

typedef struct ein_thunk {
    const ein_env *v;
    const cr_array *g; /* Ȳ, work dtype */
    size_t which;
} ein_thunk;

/* Ā_k: einsum(o, other -> k)(Ȳ, conj(other)) (two operands) or einsum(o -> 0)(Ȳ). */
static cr_status ein_grad(cr_arena *arena, const ein_env *v, const cr_array *g, size_t which,
                          cr_tangent *out)
{
    cr_array *r;
    cr_status st;
    if (v->e.nin == 1) {
        ein p = ein_swap(&v->e, OUT, 3, 0);
        const cr_array *ops[1] = {g};
        st = ein_eval(arena, &p, v->wdt, ops, &r);
    } else {
        const cr_array *other;
        st = conj_of(arena, v->wdt, v->op[1 - which], &other);
        if (st != CR_OK)
            return st;
        ein p = which == 0 ? ein_swap(&v->e, OUT, 1, 0) : ein_swap(&v->e, 0, OUT, 1);
        const cr_array *ops[2] = {which == 0 ? g : other, which == 0 ? other : g};
        st = ein_eval(arena, &p, v->wdt, ops, &r);
    }
    if (st != CR_OK)
        return st;
    return cr__give(arena, v->proj[which], r, out);
}

static cr_status ein_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    const ein_thunk *t = env;
    return ein_grad(arena, t->v, t->g, t->which, out);
}

static cr_status einsum_pullback(CR__PULLBACK_PARAMS)
{
    const ein_env *v = env;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr_status st =
        cr__tan_array(arena, "einsum_pullback", *dy, v->e.t[OUT].n, v->yshape, v->wdt, &g);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < v->e.nin && k + 2 < nx; k++) {
        if (g == NULL) {
            dx[k + 2] = cr_tangent_zero();
            continue;
        }
        if (v->e.nin == 1)
            return ein_grad(arena, v, g, 0, &dx[2]); /* the only cotangent: no thunk */
        CR__ARENA_NEW(arena, ein_thunk, t);
        *t = (ein_thunk){v, g, k};
        st = cr__thunk(arena, ein_thunk_fn, NULL, t, "einsum_pullback_thunk", &dx[k + 2]);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_status einsum_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, ein_env, v);
    cr_status st = ein_forward(arena, args, nargs, v, y);
    bool rev = udata != CR__PRIMAL_ONLY; /* the pullback is asked */
    for (size_t k = 0; st == CR_OK && rev && k < v->e.nin; k++)
        st = cr_project_new(arena, &args[k + 1], &v->proj[k]);
    if (st == CR_OK && rev)
        *pb = (cr_pullback){einsum_pullback, v, "einsum_pullback", nargs + 1};
    return st;
}

/* frule: ẏ = einsum(Ȧ, B) + einsum(A, Ḃ), or einsum(Ȧ). */
static cr_status einsum_frule(CR__FRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, ein_env, v);
    cr_array *acc = NULL;
    cr_status st = ein_forward(arena, args, nargs, v, y);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < v->e.nin; k++) {
        const cr_array *t;
        st = cr__dx_array(arena, "einsum", dargs, args, k + 1, v->wdt, &t);
        if (st != CR_OK)
            return st;
        if (t == NULL)
            continue;
        const cr_array *ops[2] = {v->op[0], v->e.nin == 2 ? v->op[1] : NULL};
        ops[k] = t;
        cr_array *r;
        st = ein_eval(arena, &v->e, v->wdt, ops, &r);
        if (st != CR_OK)
            return st;
        if (acc == NULL)
            acc = r;
        else
            cr__axpy(1, r, acc);
    }
    if (acc == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    return cr_project_tangent(arena, y, cr_tangent_array(acc), dy);
}

CR__ARRAY_FN(einsum, "einsum", -1)

/* ---- Test registration ---------------------------------------------------------------------- */

/* Specs the sampler draws from: matrix and batched products, transposed operands and
 * outputs, outer and elementwise products, full contractions, diagonals (read and written),
 * traces, sums inside one operand, implicit outputs. */
static const char *const k_specs2[] = {
    "ij,jk->ik",   "bij,bjk->bik", "bij,bkj->bik", "ij,kj->ki", "ij,ij->",         "i,j->ij",
    "i,i->i",      "ij,j->i",      "ijk,jkl->li",  "ii,ij->j",  "ij,jk",           "ab,bc->abc",
    "bij,jk->bik", "ij,k->",       "iij,j->i",     "i,ij->ji",  "bhqd,bhkd->bhqk",
};
static const char *const k_specs1[] = {
    "ij->ji", "ii->i", "ii->", "ijk->kij", "ij->", "ij->i", "i->ii", "iji->j", "ijk", "i->i",
};

static cr_status sample_einsum(CR__SAMPLE_PARAMS)
{
    size_t nops = nargs - 1;
    const char *spec = nops == 2 ? k_specs2[cr__rng_below(rng, sizeof k_specs2 / sizeof *k_specs2)]
                                 : k_specs1[cr__rng_below(rng, sizeof k_specs1 / sizeof *k_specs1)];
    CR__ARENA_NEW(arena, cr_einsum_spec, s);
    s->spec = spec;
    args[0] = cr_value_struct(&cr_einsum_spec_type, s);
    ein e;
    cr_status st = ein_parse(arena, spec, nops, &e);
    if (st != CR_OK)
        return st;
    /* Extents 1 to 3; a hard point (one time in four) has extents 1 and exact zeros. */
    bool hard = cr__rng_below(rng, 4) == 0;
    for (size_t l = 0; l < e.nlab; l++)
        e.ext[l] = hard && cr__rng_below(rng, 2) ? 1 : 2 + cr__rng_below(rng, 2);
    for (size_t k = 0; k < nops; k++) {
        size_t shape[CR_ARRAY_MAX_DIMS];
        for (size_t d = 0; d < e.t[k].n; d++)
            shape[d] = e.ext[e.t[k].lab[d]];
        cr_array *a;
        st = cr__rand_array(arena, rng, cr__rng_dtype(rng), e.t[k].n, shape, -1.5, 1.5, &a);
        if (st != CR_OK)
            return st;
        size_t n = cr_array_numel(a);
        if (hard && n > 1)
            cr__store(a, (ptrdiff_t)cr__rng_below(rng, n), 0);
        if (a->ndim == 2 && cr__rng_below(rng, 3) == 0) { /* a transposed view of a copy */
            cr_array *c;
            size_t ts[2] = {a->shape[1], a->shape[0]};
            st = cr__new(arena, (cr_dtype)a->dtype, 2, ts, false, &c);
            if (st != CR_OK)
                return st;
            for (size_t i = 0; i < a->shape[0]; i++)
                for (size_t j = 0; j < a->shape[1]; j++)
                    cr__store(c, (ptrdiff_t)(j * a->shape[0] + i),
                              cr__load(a, (ptrdiff_t)(i * a->shape[1] + j)));
            c->shape[0] = a->shape[0];
            c->shape[1] = a->shape[1];
            c->strides[0] = 1;
            c->strides[1] = (ptrdiff_t)a->shape[0];
            a = c;
        }
        args[k + 1] = cr_value_array(a);
    }
    return CR_OK;
}

static const cr_rule_test k_test_einsum = {.sample = sample_einsum};

cr_status cr__family_contract(cr_registry *reg)
{
    static const cr_argspec a1[2] = {{CR_M_STRUCT, &cr_einsum_spec_type}, {CR__M_FARRAY, NULL}};
    static const cr_argspec a2[3] = {
        {CR_M_STRUCT, &cr_einsum_spec_type}, {CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL}};
    cr_status st = cr__add_rule_so(reg, &einsum_function, a1, 2, false, einsum_frule, einsum_rrule,
                                   &k_test_einsum, CR_LINEAR, NULL);
    if (st == CR_OK)
        st = cr__add_rule_so(reg, &einsum_function, a2, 3, false, einsum_frule, einsum_rrule,
                             &k_test_einsum, CR_MULTILINEAR, NULL);
    return st;
}
