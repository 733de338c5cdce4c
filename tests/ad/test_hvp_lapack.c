/*
 * The second-order forms of the LAPACK-level functions (src/rulesets/linalg/forms_factors.c):
 * potrf, potrs, getrf, getri, getrs, trtrs and trsyl on second-order tapes. Each H v (cr_tape_ahvp)
 * is checked against central differences, along the direction, of the gradient a first-order
 * tape computes, at several points and directions, each function composed with others so
 * that its cotangent varies from element to element: both triangles (uplo), both ops
 * (trans), unit and non-unit diagonals, vector and matrix right-hand sides, each argument a
 * variable or a constant, the functions chained as LAPACK's users chain them (getrf then
 * getri or getrs, potrf then potrs), 2 x 2 Schur blocks for trsyl; inputs tagged Diagonal,
 * Upper, Lower, Symmetric and Hermitian (the rules read their logical dense matrices and
 * project the cotangents); a full Hessian (cr_tape_hessian) of three scalars through all
 * seven; and the refusals.
 */
#include <math.h>
#include <stdio.h>

#include "test_sprob.h"

/* ---- Losses --------------------------------------------------------------------------------- */

/* Weights of up to 16 elements, all different. */
static double k_w[16] = {1.0, -0.7, 2.0,  0.4, -1.3, 0.9,  0.25, -0.5,
                         1.7, 0.3,  -2.1, 0.8, 0.6,  -0.2, 1.1,  -0.9};

/* Σ w ⊙ sin(M) + (Σ M²)² / 8 over M (a vector of n or an n x c matrix, at most 16 elements):
 * a loss whose cotangent varies by element. */
static cr_var mix(cr_tape *t, cr_targ M)
{
    static cr_array w[8];
    static int next;
    const cr_array *m = M.u.a.a;
    if (m == NULL)
        return cr_const((double)NAN);
    cr_array *store = &w[next++ % 8];
    *store = m->ndim == 1 ? cr_array_vector(k_w, m->shape[0])
                          : cr_array_matrix(k_w, m->shape[0], m->shape[1]);
    cr_avar s = cr_av_broadcast1(t, &cr_fn_sin, M);
    cr_var a = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(s), cr_targ_arr(cr_av_const(store))));
    cr_var q = sum_sq(t, M.u.a);
    return cr_add(t, a, cr_mul(t, cr_mul(t, q, q), cr_const(0.125)));
}

static cr_avar acall(cr_tape *t, const cr_value *f, cr_targ *args, size_t n)
{
    return cr_tape_acall_a(t, f, args, n);
}

/* The variable of an input, or a constant of its shape whose values do not depend on the
 * point (so that the central differences, which move every input, see a constant too):
 * 2 + i/2 on the diagonal, 0.3 sin(i + 2j) elsewhere, and -0.9 at (1, 0) (a 2 x 2 Schur block
 * for trsyl's A). */
static cr_targ var_or_const(cr_avar X, bool konst)
{
    static double buf[8][16];
    static cr_array pool[8];
    static int next;
    if (!konst)
        return cr_targ_arr(X);
    int q = next++ % 8;
    const cr_array *x = X.a;
    size_t r = x->shape[0], c = x->ndim == 1 ? 1 : x->shape[1];
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++)
            buf[q][i * c + j] = i == j             ? 2.0 + 0.5 * (double)i
                                : i == 1 && j == 0 ? -0.9
                                                   : 0.3 * sin((double)(i + 2 * j));
    pool[q] = x->ndim == 1 ? cr_array_vector(buf[q], r) : cr_array_matrix(buf[q], r, c);
    return cr_targ_arr(cr_av_const(&pool[q]));
}

/* A point: noise of amplitude scale plus dg on the diagonal of the n x n block at off. */
static void spoint(size_t L, unsigned seed, double scale, size_t off, size_t n, double dg,
                   double *z)
{
    point(L, seed, scale, z);
    for (size_t i = 0; i < n; i++)
        z[off + i * n + i] += dg + 0.4 * (double)i;
}

/* ---- potrf, potrs --------------------------------------------------------------------------- */

typedef struct cfg {
    int uplo, trans, diag;
    bool vec;        /* B a vector */
    bool ca, cb, cc; /* the arguments given as constants */
    bool sym;        /* A passed through the Symmetric view */
    int isgn;
} cfg;

/* mix(potrf(A, uplo)) (A, or Symmetric(A), 3 x 3) */
static cr_var potrf_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const cfg *c = env;
    cr_targ A = cr_targ_arr(X[0]);
    if (c->sym)
        A = cr_targ_arr(call_a(t, &cr_fn_symmetric, A, A, 1));
    cr_targ a[2] = {A, i64(c->uplo)};
    return mix(t, cr_targ_arr(acall(t, &cr_fn_potrf, a, 2)));
}

static void test_potrf(void **state)
{
    fixture *f = *state;
    static const cfg cs[4] = {
        {.uplo = 'U'}, {.uplo = 'L'}, {.uplo = 'U', .sym = true}, {.uplo = 'l', .sym = true}};
    for (int q = 0; q < 4; q++) {
        prob p = {.f = potrf_p, .env = &cs[q], .na = 1, .ndim = {2}, .shape = {{3, 3}}};
        for (unsigned seed = 0; seed < 3; seed++) {
            double z[9];
            spoint(9, seed + 4 * (unsigned)q, 0.5, 0, 3, 2.0, z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
    }
    /* A tagged with each structure (its logical dense matrix read, the cotangent projected) */
    for (int q = 0; q < 6; q++)
        for (int u = 0; u < 2; u++) {
            sprob p = {.p = {.f = potrf_p, .env = &cs[u], .na = 1, .ndim = {2}, .shape = {{3, 3}}},
                       .st = {k_structs[q]}};
            double z[9];
            spoint(9, (unsigned)(q + u), 0.5, 0, 3, 2.0, z);
            scheck(f->ctx, &p, z, 1e-6, 2);
        }
}

/* mix(potrs(F, uplo, B)) (F 3 x 3, B 3 x 2 or 3) */
static cr_var potrs_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const cfg *c = env;
    cr_targ a[3] = {var_or_const(X[0], c->ca), i64(c->uplo), var_or_const(X[1], c->cb)};
    return mix(t, cr_targ_arr(acall(t, &cr_fn_potrs, a, 3)));
}

/* potrf then potrs: mix(potrs(U, uplo, B)) + sum(sin.(U)), U = potrf(A, uplo) */
static cr_var chol_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const cfg *c = env;
    cr_targ a[2] = {cr_targ_arr(X[0]), i64(c->uplo)};
    cr_avar U = acall(t, &cr_fn_potrf, a, 2);
    cr_targ b[3] = {cr_targ_arr(U), i64(c->uplo), cr_targ_arr(X[1])};
    return cr_add(t, mix(t, cr_targ_arr(acall(t, &cr_fn_potrs, b, 3))), sum_sin(t, U));
}

static void test_potrs(void **state)
{
    fixture *f = *state;
    static const cfg cs[6] = {{.uplo = 'U'},
                              {.uplo = 'L'},
                              {.uplo = 'U', .vec = true},
                              {.uplo = 'L', .vec = true},
                              {.uplo = 'U', .cb = true},
                              {.uplo = 'L', .ca = true}};
    for (int q = 0; q < 6; q++) {
        prob p = {.f = potrs_p,
                  .env = &cs[q],
                  .na = 2,
                  .ndim = {2, cs[q].vec ? 1 : 2},
                  .shape = {{3, 3}, {3, 2}}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[15];
            spoint(15, seed + 2 * (unsigned)q, 0.6, 0, 3, 1.5, z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
    }
    for (int q = 0; q < 4; q++) {
        prob p = {.f = chol_p,
                  .env = &cs[q],
                  .na = 2,
                  .ndim = {2, cs[q].vec ? 1 : 2},
                  .shape = {{3, 3}, {3, 2}}};
        double z[15];
        spoint(15, (unsigned)q, 0.5, 0, 3, 2.0, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
    /* F and B tagged with each structure */
    for (int q = 0; q < 6; q++) {
        sprob p = {.p = {.f = potrs_p,
                         .env = &cs[q % 2],
                         .na = 2,
                         .ndim = {2, 2},
                         .shape = {{3, 3}, {3, 3}}},
                   .st = {k_structs[q], k_structs[5 - q]}};
        double z[18];
        spoint(18, (unsigned)q, 0.5, 0, 3, 1.5, z);
        scheck(f->ctx, &p, z, 1e-6, 2);
    }
}

/* ---- getrf, getri, getrs ------------------------------------------------------------------ */

/* mix(F) for (F, ipiv) = getrf(A) (A n x n, n in env) */
static cr_var getrf_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ a = cr_targ_arr(X[0]), r[2];
    if (cr_tape_acall_n(t, &cr_fn_getrf, &a, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    return mix(t, r[0]);
}

/* Points where the pivoting permutes the rows: the largest entry of the first column below
 * the diagonal. */
static void lu_point(size_t n, unsigned seed, double *z)
{
    point(n * n, seed, 0.8, z);
    z[(n - 1) * n] += 2.5;
    z[n + 1] += 1.5;
}

static void test_getrf(void **state)
{
    fixture *f = *state;
    for (size_t n = 3; n <= 4; n++) {
        prob p = {.f = getrf_p, .na = 1, .ndim = {2}, .shape = {{n, n}}};
        for (unsigned seed = 0; seed < 3; seed++) {
            double z[16];
            lu_point(n, seed, z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
    }
    for (int q = 0; q < 6; q++) {
        sprob p = {.p = {.f = getrf_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}},
                   .st = {k_structs[q]}};
        double z[9];
        spoint(9, (unsigned)q, 0.8, 0, 3, 0.5, z);
        z[6] += 2.5; /* pivoting */
        scheck(f->ctx, &p, z, 1e-6, 2);
    }
}

static const int64_t k_ipiv3[3] = {3, 3, 3}, k_ipiv4[4] = {2, 4, 3, 4};

static cr_targ ipiv_of(size_t n)
{
    static cr_array ip3, ip4;
    ip3 = (cr_array){0};
    ip4 = (cr_array){0};
    size_t s3 = 3, s4 = 4;
    cr_array_view_init(&ip3, (void *)(uintptr_t)k_ipiv3, CR_DT_I64, 1, &s3, NULL);
    cr_array_view_init(&ip4, (void *)(uintptr_t)k_ipiv4, CR_DT_I64, 1, &s4, NULL);
    return cr_targ_value(cr_value_array(n == 3 ? &ip3 : &ip4));
}

/* mix(getri(F, ipiv)) with F a variable n x n (packed factors) and ipiv constant */
static cr_var getri_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ a[2] = {cr_targ_arr(X[0]), ipiv_of(X[0].a->shape[0])};
    return mix(t, cr_targ_arr(acall(t, &cr_fn_getri, a, 2)));
}

/* getrf then getri: mix(getri(F, ipiv)) + sum(sin.(F)), (F, ipiv) = getrf(A) */
static cr_var lu_inv_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ a = cr_targ_arr(X[0]), r[2];
    if (cr_tape_acall_n(t, &cr_fn_getrf, &a, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    return cr_add(t, mix(t, cr_targ_arr(acall(t, &cr_fn_getri, r, 2))), sum_sin(t, r[0].u.a));
}

/* F packed factors with U's diagonal away from zero */
static void packed_point(size_t L, size_t n, unsigned seed, double *z)
{
    point(L, seed, 0.6, z);
    for (size_t i = 0; i < n; i++)
        z[i * n + i] += i % 2 ? -1.6 : 1.4;
}

static void test_getri(void **state)
{
    fixture *f = *state;
    for (size_t n = 3; n <= 4; n++) {
        prob p = {.f = getri_p, .na = 1, .ndim = {2}, .shape = {{n, n}}};
        prob q = {.f = lu_inv_p, .na = 1, .ndim = {2}, .shape = {{n, n}}};
        for (unsigned seed = 0; seed < 3; seed++) {
            double z[16];
            packed_point(n * n, n, seed, z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
            lu_point(n, seed, z);
            check_hvp_dirs(f->ctx, &q, z, 1e-6, 3);
        }
    }
    for (int q = 0; q < 6; q++) {
        sprob p = {.p = {.f = getri_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}},
                   .st = {k_structs[q]}};
        double z[9];
        packed_point(9, 3, (unsigned)q, z);
        scheck(f->ctx, &p, z, 1e-6, 2);
    }
}

/* mix(getrs(F, ipiv, B, trans)) (F 3 x 3 packed, B 3 x 2 or 3) */
static cr_var getrs_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const cfg *c = env;
    cr_targ a[4] = {var_or_const(X[0], c->ca), ipiv_of(3), var_or_const(X[1], c->cb),
                    i64(c->trans)};
    return mix(t, cr_targ_arr(acall(t, &cr_fn_getrs, a, 4)));
}

/* getrf then getrs: mix(getrs(F, ipiv, B, trans)) + sum(sin.(F)) */
static cr_var lu_solve_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const cfg *c = env;
    cr_targ a = cr_targ_arr(X[0]), r[2];
    if (cr_tape_acall_n(t, &cr_fn_getrf, &a, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_targ b[4] = {r[0], r[1], cr_targ_arr(X[1]), i64(c->trans)};
    return cr_add(t, mix(t, cr_targ_arr(acall(t, &cr_fn_getrs, b, 4))), sum_sin(t, r[0].u.a));
}

static void test_getrs(void **state)
{
    fixture *f = *state;
    static const cfg cs[6] = {{.trans = 'N'},
                              {.trans = 'T'},
                              {.trans = 'N', .vec = true},
                              {.trans = 'C', .vec = true},
                              {.trans = 'T', .cb = true},
                              {.trans = 'N', .ca = true}};
    for (int q = 0; q < 6; q++) {
        prob p = {.f = getrs_p,
                  .env = &cs[q],
                  .na = 2,
                  .ndim = {2, cs[q].vec ? 1 : 2},
                  .shape = {{3, 3}, {3, 2}}};
        prob r = p;
        r.f = lu_solve_p;
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[15];
            packed_point(15, 3, seed + 2 * (unsigned)q, z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
            lu_point(3, seed + (unsigned)q, z);
            if (q < 4)
                check_hvp_dirs(f->ctx, &r, z, 1e-6, 3);
        }
    }
    for (int q = 0; q < 6; q++) {
        sprob p = {.p = {.f = getrs_p,
                         .env = &cs[q % 2],
                         .na = 2,
                         .ndim = {2, 2},
                         .shape = {{3, 3}, {3, 3}}},
                   .st = {k_structs[q], k_structs[5 - q]}};
        double z[18];
        packed_point(18, 3, (unsigned)q, z);
        scheck(f->ctx, &p, z, 1e-6, 2);
    }
}

/* ---- trtrs ---------------------------------------------------------------------------------- */

/* mix(trtrs(A, uplo, trans, diag, B)) (A 3 x 3, B 3 x 2 or 3) */
static cr_var trtrs_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const cfg *c = env;
    cr_targ a[5] = {var_or_const(X[0], c->ca), i64(c->uplo), i64(c->trans), i64(c->diag),
                    var_or_const(X[1], c->cb)};
    return mix(t, cr_targ_arr(acall(t, &cr_fn_trtrs, a, 5)));
}

static void test_trtrs(void **state)
{
    fixture *f = *state;
    static const cfg cs[10] = {
        {.uplo = 'U', .trans = 'N', .diag = 'N'},
        {.uplo = 'L', .trans = 'N', .diag = 'N'},
        {.uplo = 'U', .trans = 'T', .diag = 'N'},
        {.uplo = 'L', .trans = 'C', .diag = 'N'},
        {.uplo = 'U', .trans = 'N', .diag = 'U'},
        {.uplo = 'L', .trans = 'T', .diag = 'U'},
        {.uplo = 'U', .trans = 'T', .diag = 'N', .vec = true},
        {.uplo = 'L', .trans = 'N', .diag = 'U', .vec = true},
        {.uplo = 'U', .trans = 'T', .diag = 'N', .cb = true},
        {.uplo = 'L', .trans = 'N', .diag = 'N', .ca = true},
    };
    for (int q = 0; q < 10; q++) {
        prob p = {.f = trtrs_p,
                  .env = &cs[q],
                  .na = 2,
                  .ndim = {2, cs[q].vec ? 1 : 2},
                  .shape = {{3, 3}, {3, 2}}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[15];
            packed_point(15, 3, seed + 2 * (unsigned)q, z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
    }
    for (int q = 0; q < 6; q++) {
        sprob p = {.p = {.f = trtrs_p,
                         .env = &cs[q % 4],
                         .na = 2,
                         .ndim = {2, 2},
                         .shape = {{3, 3}, {3, 3}}},
                   .st = {k_structs[q], k_structs[5 - q]}};
        double z[18];
        packed_point(18, 3, (unsigned)q, z);
        scheck(f->ctx, &p, z, 1e-6, 2);
    }
}

/* ---- trsyl ---------------------------------------------------------------------------------- */

/* mix(trsyl(ta, tb, isgn, A, B, C)), A 3 x 3 with a 2 x 2 block at its top left (its (2, 1)
 * entry follows the block and is not read; (2, 0) is not read), B 2 x 2: triu(B) when tb's
 * case has no block (so that no direction turns its zero subdiagonal into a block), else a
 * 2 x 2 block; C 3 x 2. */
static cr_var trsyl_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const cfg *c = env;
    cr_targ B = var_or_const(X[1], c->cb);
    if (c->diag == 'U') /* B upper triangular */
        B = cr_targ_arr(call_a(t, &cr_fn_triu, B, B, 1));
    cr_targ a[6] = {i64(c->trans),
                    i64(c->uplo),
                    i64(c->isgn),
                    var_or_const(X[0], c->ca),
                    B,
                    var_or_const(X[2], c->cc)};
    return mix(t, cr_targ_arr(acall(t, &cr_fn_trsyl, a, 6)));
}

static void trsyl_point(unsigned seed, bool bblock, double *z)
{
    point(19, seed, 0.4, z);
    /* A: the block [2 0.9; -0.9 2.5] (eigenvalues 2.25 ± 0.86i), then 4 */
    z[0] += 2.0;
    z[1] = 0.9 + 0.1 * z[1];
    z[3] = -0.9 + 0.1 * z[3];
    z[4] += 2.5;
    z[8] += 4.0;
    /* B: eigenvalues in [-0.9, 0.9], apart from A's and from their negatives (isgn ±1); a
     * block [0.1 0.5; -0.7 0.3] (complex pair) when bblock */
    z[9] += bblock ? 0.1 : 0.5;
    z[10] = bblock ? 0.5 + 0.1 * z[10] : z[10];
    z[11] = bblock ? -0.7 + 0.1 * z[11] : z[11];
    z[12] += bblock ? 0.3 : -0.5;
}

static void test_trsyl(void **state)
{
    fixture *f = *state;
    /* trans: transa, uplo: transb, diag 'U': B triangular */
    static const cfg cs[9] = {
        {.trans = 'N', .uplo = 'N', .isgn = 1, .diag = 'U'},
        {.trans = 'T', .uplo = 'N', .isgn = 1, .diag = 'U'},
        {.trans = 'N', .uplo = 'T', .isgn = -1, .diag = 'U'},
        {.trans = 'C', .uplo = 'C', .isgn = -1, .diag = 'U'},
        {.trans = 'N', .uplo = 'N', .isgn = 1, .diag = 'N'},
        {.trans = 'T', .uplo = 'T', .isgn = -1, .diag = 'N'},
        {.trans = 'N', .uplo = 'T', .isgn = 1, .diag = 'U', .ca = true},
        {.trans = 'T', .uplo = 'N', .isgn = -1, .diag = 'U', .cb = true, .cc = true},
        {.trans = 'N', .uplo = 'N', .isgn = 1, .diag = 'N', .ca = true, .cb = true},
    };
    for (int q = 0; q < 9; q++) {
        prob p = {.f = trsyl_p,
                  .env = &cs[q],
                  .na = 3,
                  .ndim = {2, 2, 2},
                  .shape = {{3, 3}, {2, 2}, {3, 2}}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[19];
            trsyl_point(seed + 2 * (unsigned)q, cs[q].diag == 'N', z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
    }
}

/* ---- A full Hessian ------------------------------------------------------------------------- */

static double k_E[9] = {0.9, 0.2, -0.3, 0.1, 1.1, 0.4, -0.2, 0.5, 0.8};
static double k_F[9] = {0.3, -0.6, 0.2, 0.7, 0.1, -0.4, 0.5, 0.3, -0.2};
static double k_G[9] = {-0.4, 0.3, 0.6, 0.2, -0.5, 0.1, 0.3, 0.4, 0.2};
static double k_C[9] = {4.0, 0.5, -0.3, 0.2, 3.5, 0.6, 1.5, -0.4, 3.0};
static double k_b[6] = {1.0, -0.5, 0.3, 0.8, -1.2, 0.6}, k_s[4] = {-1.0, 0.4, 0.0, -2.0};

static cr_avar scaled(cr_tape *t, cr_var s, cr_array *M)
{
    return cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(cr_av_const(M)));
}

static cr_avar plus(cr_tape *t, cr_avar a, cr_avar b)
{
    return cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(a), cr_targ_arr(b));
}

/* M = s0 E + s1 F + s0 s2 G + C (3 x 3, diagonally dominant, positive definite on its upper
 * triangle); every function of this file of M */
static cr_var seven_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array E, F, G, C, b, S;
    E = cr_array_matrix(k_E, 3, 3);
    F = cr_array_matrix(k_F, 3, 3);
    G = cr_array_matrix(k_G, 3, 3);
    C = cr_array_matrix(k_C, 3, 3);
    b = cr_array_matrix(k_b, 3, 2);
    S = cr_array_matrix(k_s, 2, 2);
    cr_avar M = plus(t, plus(t, scaled(t, s[0], &E), scaled(t, s[1], &F)),
                     plus(t, scaled(t, cr_mul(t, s[0], s[2]), &G), cr_av_const(&C)));
    cr_targ m = cr_targ_arr(M), B = cr_targ_arr(cr_av_const(&b)), r[2];
    cr_targ pa[2] = {m, i64('U')};
    cr_avar U = acall(t, &cr_fn_potrf, pa, 2);
    cr_targ sa[3] = {cr_targ_arr(U), i64('U'), B};
    cr_var y = cr_add(t, sum_sin(t, U), mix(t, cr_targ_arr(acall(t, &cr_fn_potrs, sa, 3))));
    if (cr_tape_acall_n(t, &cr_fn_getrf, &m, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_targ ga[4] = {r[0], r[1], B, i64('T')};
    y = cr_add(t, y, mix(t, r[0]));
    y = cr_add(t, y, mix(t, cr_targ_arr(acall(t, &cr_fn_getri, r, 2))));
    y = cr_add(t, y, mix(t, cr_targ_arr(acall(t, &cr_fn_getrs, ga, 4))));
    cr_targ ta[5] = {m, i64('L'), i64('N'), i64('N'), B};
    y = cr_add(t, y, mix(t, cr_targ_arr(acall(t, &cr_fn_trtrs, ta, 5))));
    cr_targ tu = cr_targ_arr(call_a(t, &cr_fn_triu, m, m, 1));
    cr_targ ya[6] = {i64('N'), i64('N'), i64(1), tu, cr_targ_arr(cr_av_const(&S)), B};
    return cr_add(t, y, mix(t, cr_targ_arr(acall(t, &cr_fn_trsyl, ya, 6))));
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = seven_p, .ns = 3, .na = 0};
    double pts[3][3] = {{0.6, 0.4, -0.6}, {-0.7, 0.9, 0.8}, {1.1, -0.8, 0.5}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* ---- Refusals ------------------------------------------------------------------------------- */

static void test_refusals(void **state)
{
    fixture *f = *state;
    double m[9] = {3, 1, 0, 1, 4, 1, 0, 1, 5}, zc[12] = {1, 0.5, 2, 0, 0, 1, 1, 0, 0, 0, 1, 1};
    size_t shape[2] = {3, 2};
    cr_array ma = cr_array_matrix(m, 3, 3), za;
    assert_int_equal(cr_array_view_init(&za, zc, CR_DT_C128, 2, shape, NULL), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);

    /* a complex constant right-hand side would make the result complex */
    static const cr_value *const fns[3] = {&cr_fn_potrs, &cr_fn_getrs, &cr_fn_trtrs};
    static const char *const msgs[3] = {
        "potrs: no second-order form on the tape: argument 2 is complex; the form covers real "
        "matrices only",
        "getrs: no second-order form on the tape: argument 2 is complex",
        "trtrs: no second-order form on the tape: argument 4 is complex"};
    for (int q = 0; q < 3; q++) {
        cr_tape_reset(t);
        cr_targ A = cr_targ_arr(cr_tape_array_input(t, &ma)), Z = cr_targ_arr(cr_av_const(&za));
        cr_targ args[3][5] = {
            {A, i64('U'), Z}, {A, ipiv_of(3), Z, i64('N')}, {A, i64('U'), i64('N'), i64('N'), Z}};
        static const size_t na[3] = {3, 4, 5};
        cr_avar y = acall(t, fns[q], args[q], na[q]);
        assert_true(y.idx == CR_VAR_CONST);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
        assert_contains(cr_tape_errmsg(t), msgs[q]);
        assert_int_equal(cr_av_sum(t, cr_tape_array_input(t, &ma)).idx, CR_VAR_CONST); /* sticky */
    }

    /* trsyl: a complex constant C; isgn a variable */
    double sb[4] = {-1, 0.5, 0, -2};
    cr_array sba = cr_array_matrix(sb, 2, 2);
    cr_tape_reset(t);
    cr_targ A = cr_targ_arr(cr_tape_array_input(t, &ma));
    cr_targ ya[6] = {i64('N'),
                     i64('N'),
                     i64(1),
                     A,
                     cr_targ_arr(cr_av_const(&sba)),
                     cr_targ_arr(cr_av_const(&za))};
    acall(t, &cr_fn_trsyl, ya, 6);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "trsyl: no second-order form on the tape: argument 5 is "
                                       "complex; the form covers real matrices only");
    cr_tape_reset(t);
    A = cr_targ_arr(cr_tape_array_input(t, &ma));
    cr_var sg = cr_tape_input(t, 1.0);
    cr_targ yb[6] = {i64('N'), i64('N'), cr_targ_var(sg), A, cr_targ_arr(cr_av_const(&sba)), A};
    acall(t, &cr_fn_trsyl, yb, 6);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t),
                    "trsyl: no second-order form on the tape: an argument before A is a variable");

    /* getrf of a singular matrix: refused by the rule when recorded (its derivative needs
     * U⁻¹) */
    double sing[4] = {1, 2, 2, 4};
    cr_array sa = cr_array_matrix(sing, 2, 2);
    cr_tape_reset(t);
    cr_targ S = cr_targ_arr(cr_tape_array_input(t, &sa)), r[2];
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_getrf, &S, 1, r, 2), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "getrf: the matrix is singular");
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_potrf, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_potrs, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_getrf, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_getri, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_getrs, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_trtrs, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_trsyl, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
