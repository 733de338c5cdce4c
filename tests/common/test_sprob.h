/*
 * A harness for second-order tests of structured array inputs, shared by
 * test_hvp_structured.c and test_hvp_lapack.c: a problem (test_forms.h's
 * prob) whose array input j is recorded tagged with a structure, its gradient from a
 * first-order tape, and H·v from a second-order tape checked against central differences of
 * that gradient, the direction tagged like its input.
 */
#ifndef TEST_SPROB_H
#define TEST_SPROB_H

#include "test_forms.h"

/* A problem whose array input j is recorded tagged st[j] (square matrices; a Diagonal input
 * keeps the diagonal of its n x n block of the flat vector: strides {n + 1, 0}). */
typedef struct sprob {
    prob p;
    uint8_t st[MAXA];
} sprob;

static inline void tag(const sprob *q, cr_array *a)
{
    for (size_t j = 0; j < q->p.na; j++) {
        a[j].structure = q->st[j];
        if (q->st[j] == CR_MAT_DIAGONAL) {
            a[j].strides[0] = (ptrdiff_t)a[j].shape[0] + 1;
            a[j].strides[1] = 0;
        }
    }
}

static inline cr_var srecord(cr_tape *t, const sprob *q, double *z, cr_array *a, cr_var *s,
                             cr_avar *X)
{
    cr_tape_reset(t);
    views(&q->p, z, a);
    tag(q, a);
    for (size_t i = 0; i < q->p.ns; i++)
        s[i] = cr_tape_input(t, z[i]);
    for (size_t j = 0; j < q->p.na; j++)
        X[j] = cr_tape_array_input(t, &a[j]);
    return q->p.f(t, s, X, q->p.env);
}

/* The gradient at z from a first-order tape (dense outputs, the projected cotangents). */
static inline void sgrad_at(cr_ctx *ctx, const sprob *q, double *z, double *g)
{
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    cr_array a[MAXA], ga[MAXA], *gp[MAXA];
    cr_var s[MAXS];
    cr_avar X[MAXA];
    cr_var y = srecord(t, q, z, a, s, X);
    views(&q->p, g, ga);
    for (size_t j = 0; j < q->p.na; j++)
        gp[j] = &ga[j];
    assert_ok(t, cr_tape_gradient_arrays(t, y, s, q->p.ns, g, X, q->p.na, gp));
    cr_tape_free(t);
}

/* H v against central differences of the gradient along ndirs directions (each direction
 * array tagged like its input, so both read the same elements of it). */
static inline void scheck(cr_ctx *ctx, const sprob *q, double *z, double tol, unsigned ndirs)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    size_t L = flat_len(&q->p);
    for (unsigned seed = 0; seed < ndirs; seed++) {
        double v[MAXZ], got[MAXZ], zp[MAXZ], zm[MAXZ], gp_[MAXZ], gm[MAXZ], h = 1e-5;
        direction(L, seed, v);
        cr_array a[MAXA], va[MAXA], oa[MAXA];
        const cr_array *vp[MAXA];
        cr_array *op[MAXA];
        cr_var s[MAXS];
        cr_avar X[MAXA];
        cr_var y = srecord(t, q, z, a, s, X);
        assert_ok(t, cr_tape_status(t));
        views(&q->p, v, va);
        tag(q, va);
        views(&q->p, got, oa);
        for (size_t j = 0; j < q->p.na; j++) {
            vp[j] = &va[j];
            op[j] = &oa[j];
        }
        assert_ok(t, cr_tape_ahvp(t, y, s, q->p.ns, v, got, X, q->p.na, vp, op));
        for (size_t e = 0; e < L; e++) {
            zp[e] = z[e] + h * v[e];
            zm[e] = z[e] - h * v[e];
        }
        sgrad_at(ctx, q, zp, gp_);
        sgrad_at(ctx, q, zm, gm);
        for (size_t e = 0; e < L; e++)
            ASSERT_CLOSE(got[e], (gp_[e] - gm[e]) / (2 * h), tol);
    }
    cr_tape_free(t);
}

static const uint8_t k_structs[6] = {CR_MAT_DENSE, CR_MAT_DIAGONAL,  CR_MAT_UPPER,
                                     CR_MAT_LOWER, CR_MAT_SYMMETRIC, CR_MAT_HERMITIAN};

#endif /* TEST_SPROB_H */
