/*
 * The operations of a matrix with a UniformScaling λI: add_uniform, sub_uniform,
 * mul_uniform, ldiv_uniform and rdiv_uniform, whose λ is passed as a plain scalar. The
 * λA⁻¹ forms reuse the rule of matinv through dispatch.
 */
#include "family.h"

/* A scalar tangent of the work dtype wdt holding v (real part for real wdt). */
static cr_tangent work_scalar(cr_dtype wdt, cr_complex v)
{
    return wdt == CR_DT_C128 ? cr_tangent_c128(v) : cr_tangent_f64(creal(v));
}

/* ---- UniformScaling: A ± λI, λA, A / λ, λ A⁻¹ ----------------------------------------------- */

typedef enum { U_ADD, U_SUB, U_MUL, U_LDIV, U_RDIV } u_op;
static const char *const k_u_names[5] = {"add_uniform", "sub_uniform", "mul_uniform",
                                         "ldiv_uniform", "rdiv_uniform"};
static const char *const k_u_pb_names[5] = {"add_uniform_pullback", "sub_uniform_pullback",
                                            "mul_uniform_pullback", "ldiv_uniform_pullback",
                                            "rdiv_uniform_pullback"};

/* What the operation computes, given which argument is λ. */
typedef enum {
    UK_SHIFT, /* sa A + sl λ I */
    UK_SCALE, /* λ A */
    UK_DIV,   /* A / λ */
    UK_INV    /* λ A⁻¹ */
} u_kind;

typedef struct u_env {
    u_op op;
    u_kind kind;
    size_t ia, il; /* argument positions of A and λ */
    double sa, sl;
    const cr_array *A;
    const cr_array *Aw; /* dense work copy of A (of A⁻¹ for UK_INV) */
    cr_array *Y;        /* the output, work dtype */
    cr_complex lam;
    cr_dtype odt, wdt;
    cr_project *pA, *pl, *pZ;
    cr_pullback inv_pb; /* matinv's pullback (UK_INV) */
} u_env;

static cr_status u_parse(cr_arena *arena, u_op op, const cr_value *args, size_t nargs, u_env *e)
{
    const char *who = k_u_names[op];
    cr_status st = cr__nargs(arena, who, nargs, 2, 2);
    if (st != CR_OK)
        return st;
    e->op = op;
    e->ia = args[0].kind == CR_KIND_ARRAY ? 0 : 1;
    e->il = 1 - e->ia;
    cr_kind lk = args[e->il].kind;
    if (args[e->ia].kind != CR_KIND_ARRAY ||
        (lk != CR_KIND_F64 && lk != CR_KIND_F32 && lk != CR_KIND_C128 && lk != CR_KIND_I64 &&
         lk != CR_KIND_I32 && lk != CR_KIND_BOOL))
        return CR__FAIL(arena, CR_EINVAL, "%s: expected an array and a number (λ of λI)", who);
    e->A = args[e->ia].u.arr;
    if (!cr_dtype_is_float((cr_dtype)e->A->dtype))
        return CR__FAIL(arena, CR_EINVAL, "%s: expected an f64, f32 or c128 array", who);
    e->lam = cr__scalar_of(&args[e->il]);
    cr_dtype ld = cr__value_dtype(&args[e->il]);
    e->odt = cr__promote((cr_dtype)e->A->dtype, ld);
    e->wdt = cr__work(e->odt);
    if (e->wdt != CR_DT_C128)
        e->lam = creal(e->lam);
    bool lam_first = e->il == 0;
    e->sa = 1;
    e->sl = 1;
    switch (op) {
    case U_ADD:
        e->kind = UK_SHIFT;
        break;
    case U_SUB:
        e->kind = UK_SHIFT;
        if (lam_first)
            e->sa = -1;
        else
            e->sl = -1;
        break;
    case U_MUL:
        e->kind = UK_SCALE;
        break;
    case U_LDIV: /* (λI) \ A = A / λ;  A \ (λI) = λ A⁻¹ */
        e->kind = lam_first ? UK_DIV : UK_INV;
        break;
    case U_RDIV: /* A / (λI) = A / λ;  (λI) / A = λ A⁻¹ */
        e->kind = lam_first ? UK_INV : UK_DIV;
        break;
    }
    bool square = e->A->ndim == 2 && e->A->shape[0] == e->A->shape[1];
    if ((e->kind == UK_SHIFT || e->kind == UK_INV) && !square) {
        char buf[96];
        return CR__FAIL(arena, CR_ESHAPE, "%s: λI needs a square matrix, got shape %s", who,
                        cr__shape_str(e->A, buf, sizeof buf));
    }
    if (e->kind == UK_DIV && e->lam == 0)
        return CR__FAIL(arena, CR_EDOMAIN, "%s: division by λ = 0", who);
    return CR_OK;
}

/* The output Y (work dtype) and its value of dtype odt. For UK_INV, A⁻¹ comes from matinv's
 * rrule (with its pullback when `pullback`) or its frule (tangent in *dZ when dZ != NULL). */
static cr_status u_forward(cr_arena *arena, const cr_value *args, bool pullback,
                           const cr_tangent *dargs, cr_tangent *dZ, u_env *e, cr_value *y)
{
    const char *who = k_u_names[e->op];
    cr_status st;
    if (e->kind == UK_INV) {
        cr_value Z;
        if (dZ != NULL) {
            cr_tangent d2[2] = {cr_tangent_none(), dargs[e->ia + 1]};
            st = cr_frule(NULL, arena, d2, &cr_fn_matinv, &args[e->ia], 1, &Z, dZ);
        } else if (pullback) {
            st = cr_rrule(NULL, arena, &cr_fn_matinv, &args[e->ia], 1, &Z, &e->inv_pb);
        } else {
            st = cr_function_call(arena, &cr_fn_matinv, &args[e->ia], 1, &Z);
        }
        if (st == CR_NOTHING)
            return CR__FAIL(arena, CR_EUNIMPL, "%s: λ A⁻¹ needs matinv (built without LAPACKE)",
                            who);
        if (st == CR_OK && pullback)
            st = cr_project_new(arena, &Z, &e->pZ);
        if (st == CR_OK)
            st = cr__dense(arena, Z.u.arr, e->wdt, &e->Aw);
    } else {
        st = cr__dense(arena, e->A, e->wdt, &e->Aw);
    }
    if (st == CR_OK)
        st = cr__new_like(arena, e->wdt, e->Aw, false, &e->Y);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(e->Aw);
    for (size_t i = 0; i < n; i++) {
        cr_complex a = cr__load(e->Aw, (ptrdiff_t)i);
        cr_complex v = e->kind == UK_SHIFT ? e->sa * a
                       : e->kind == UK_DIV ? a / e->lam
                                           : e->lam * a;
        cr__store(e->Y, (ptrdiff_t)i, v);
    }
    if (e->kind == UK_SHIFT) {
        size_t m = e->A->shape[0];
        for (size_t i = 0; i < m; i++)
            cr__store(e->Y, (ptrdiff_t)(i * m + i),
                      cr__load(e->Y, (ptrdiff_t)(i * m + i)) + e->sl * e->lam);
    }
    cr_array *o;
    st = cr__cast(arena, e->Y, e->odt, &o);
    if (st == CR_OK && o == e->Y)
        st = cr_array_copy(arena, e->Y, &o); /* the pullback keeps Y */
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

typedef struct u_thunk {
    const u_env *e;
    const cr_array *g; /* Ȳ, work dtype, contiguous */
    cr_complex s;      /* Ā = s Ȳ (UK_SCALE, UK_DIV) */
} u_thunk;

static cr_status u_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    u_thunk *t = env;
    const u_env *e = t->e;
    cr_array *r;
    cr_status st = cr__new_like(arena, e->wdt, t->g, false, &r);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(t->g);
    for (size_t i = 0; i < n; i++)
        cr__store(r, (ptrdiff_t)i, t->s * cr__load(t->g, (ptrdiff_t)i));
    if (e->kind != UK_INV)
        return cr__give(arena, e->pA, r, out);
    /* Z̄ = conj(λ) Ȳ projected onto A⁻¹, then matinv's pullback. */
    cr_tangent zb, d[2];
    st = cr_project_apply(arena, e->pZ, cr_tangent_array(r), &zb);
    if (st == CR_OK)
        st = cr_pullback_call(arena, &e->inv_pb, &zb, d, 2);
    if (st == CR_OK)
        *out = d[1];
    return st;
}

CR__THUNK_ADD(u_add, u_thunk, t->e->wdt, t->e->A, cr__axpy(t->s, t->g, dest), u_thunk_fn)

/* Cotangents (conj convention; λ̄ projected onto λ, Ā onto A):
 *   sa A + sl λI:  Ā = sa Ȳ (Ȳ itself for sa = 1),  λ̄ = sl tr Ȳ;
 *   λ A:           Ā = conj(λ) Ȳ,                   λ̄ = Σ conj(A) Ȳ;
 *   A / λ:         Ā = Ȳ / conj(λ),                 λ̄ = -Σ conj(Y / λ) Ȳ;
 *   λ A⁻¹ = λ Z:   Ā = matinv's pullback at conj(λ) Ȳ,  λ̄ = Σ conj(Z) Ȳ.
 * The array cotangent is an InplaceableThunk (add! is an axpy) except for the shift. */
static cr_status u_pullback(CR__PULLBACK_PARAMS)
{
    u_env *e = env;
    const char *who = k_u_pb_names[e->op];
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_zero();
    dx[2] = cr_tangent_zero();
    const cr_array *g;
    cr_status st = cr__tan_array(arena, who, *dy, e->Y->ndim, e->Y->shape, e->wdt, &g);
    if (st != CR_OK || g == NULL)
        return st;
    size_t n = cr_array_numel(e->Y);
    cr_complex lb;
    if (e->kind == UK_SHIFT) {
        size_t m = e->A->shape[0];
        lb = 0;
        for (size_t i = 0; i < m; i++)
            lb += cr__load(g, (ptrdiff_t)(i * m + i));
        lb *= e->sl;
    } else if (e->kind == UK_DIV) {
        lb = -cr__dotc((cr_dtype)e->Y->dtype, n, e->Y->data, g->data) / conj(e->lam);
    } else {
        lb = cr__dotc((cr_dtype)e->Aw->dtype, n, e->Aw->data, g->data);
    }
    st = cr_project_apply(arena, e->pl, work_scalar(e->wdt, lb), &dx[1 + e->il]);
    if (st != CR_OK)
        return st;
    cr_tangent *da = &dx[1 + e->ia];
    if (e->kind == UK_SHIFT) {
        if (e->sa > 0)
            return cr__give_alias(arena, e->pA, (cr_array *)g, da);
        cr_array *r;
        st = cr__new_like(arena, e->wdt, g, false, &r);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < n; i++)
            cr__store(r, (ptrdiff_t)i, -cr__load(g, (ptrdiff_t)i));
        return cr__give(arena, e->pA, r, da);
    }
    CR__ARENA_NEW(arena, u_thunk, t);
    t->e = e;
    t->g = g;
    t->s = e->kind == UK_DIV ? 1 / conj(e->lam) : conj(e->lam);
    return cr__thunk(arena, u_thunk_fn, e->kind == UK_INV ? NULL : u_add, t,
                     "uniform_pullback_thunk", da);
}

static cr_status u_rrule(cr_arena *arena, u_op op, const cr_value *args, size_t nargs, cr_value *y,
                         cr_pullback *pb, const void *udata)
{
    CR__ARENA_ZNEW(arena, u_env, e);
    bool primal = udata == CR__PRIMAL_ONLY;
    cr_status st = u_parse(arena, op, args, nargs, e);
    if (st == CR_OK)
        st = u_forward(arena, args, !primal, NULL, NULL, e, y);
    st = cr__rrule_end(arena, st, udata, &args[e->ia], &e->pA, u_pullback, e, k_u_pb_names[op],
                       nargs + 1, pb);
    return st == CR_OK && !primal ? cr_project_new(arena, &args[e->il], &e->pl) : st;
}

/* frule: Ẏ = sa Ȧ + sl λ̇ I;  λ̇ A + λ Ȧ;  Ȧ / λ - λ̇ Y / λ;  λ̇ Z + λ Ż. */
static cr_status u_frule(cr_arena *arena, u_op op, const cr_tangent *dargs, const cr_value *args,
                         size_t nargs, cr_value *y, cr_tangent *dy)
{
    u_env e;
    memset(&e, 0, sizeof e);
    cr_tangent dZ = cr_tangent_zero();
    cr_status st = u_parse(arena, op, args, nargs, &e);
    if (st == CR_OK)
        st = u_forward(arena, args, false, dargs, e.kind == UK_INV ? &dZ : NULL, &e, y);
    const cr_array *dA = NULL;
    cr_complex dl = 0;
    bool nzl = false;
    if (st == CR_OK) {
        if (e.kind == UK_INV)
            st = cr__tan_array(arena, k_u_names[op], dZ, e.Y->ndim, e.Y->shape, e.wdt, &dA);
        else
            st = cr__dx_array(arena, k_u_names[op], dargs, args, e.ia, e.wdt, &dA);
    }
    if (st == CR_OK && cr__is_diff(&args[e.il]))
        st = cr__tan_scalar(arena, k_u_names[op], dargs[e.il + 1], &dl, &nzl);
    if (st != CR_OK)
        return st;
    if (e.wdt != CR_DT_C128)
        dl = creal(dl);
    if (dA == NULL && !nzl) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    size_t n = cr_array_numel(e.Y);
    cr_array *o, *oc;
    st = cr__new_like(arena, e.wdt, e.Y, true, &o);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        cr_complex a = dA != NULL ? cr__load(dA, (ptrdiff_t)i) : 0, v;
        switch (e.kind) {
        case UK_SHIFT:
            v = e.sa * a;
            break;
        case UK_DIV:
            v = (a - dl * cr__load(e.Y, (ptrdiff_t)i)) / e.lam;
            break;
        default: /* λ̇ A + λ Ȧ, A = Z for UK_INV */
            v = dl * cr__load(e.Aw, (ptrdiff_t)i) + e.lam * a;
            break;
        }
        cr__store(o, (ptrdiff_t)i, v);
    }
    if (e.kind == UK_SHIFT) {
        size_t m = e.A->shape[0];
        for (size_t i = 0; i < m; i++)
            cr__store(o, (ptrdiff_t)(i * m + i), cr__load(o, (ptrdiff_t)(i * m + i)) + e.sl * dl);
    }
    st = cr__cast(arena, o, e.odt, &oc);
    if (st == CR_OK)
        *dy = cr_tangent_array(oc);
    return st;
}

#define U_RULES(NAME, OP) CR__PARAM_RULES(NAME, u_rrule, u_frule, OP, 2)

U_RULES(add_uniform, U_ADD)
U_RULES(sub_uniform, U_SUB)
U_RULES(mul_uniform, U_MUL)
U_RULES(ldiv_uniform, U_LDIV)
U_RULES(rdiv_uniform, U_RDIV)

/* ---- Test registrations ---- */

/* UniformScaling operations: A square (shift, inverse: diagonally dominant) or of any shape
 * (scale, divide); λ an f64 (mostly), f32, c128 or integer of magnitude 0.5 to 2. */
typedef struct u_sample {
    u_op op;
    bool lam_first;
} u_sample;

static cr_status sample_uniform(CR__SAMPLE_PARAMS)
{
    const u_sample *o = env;
    bool square = o->op == U_ADD || o->op == U_SUB || (o->op == U_LDIV && !o->lam_first) ||
                  (o->op == U_RDIV && o->lam_first);
    bool inv = square && (o->op == U_LDIV || o->op == U_RDIV);
    size_t shape[2], nd = 2;
    if (square) {
        shape[0] = shape[1] = 1 + cr__rng_below(rng, 4);
    } else {
        nd = 1 + cr__rng_below(rng, 2);
        shape[0] = 2 + cr__rng_below(rng, 3);
        shape[1] = 1 + cr__rng_below(rng, 3);
    }
    cr_dtype dt = cr__rng_dtype(rng);
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, dt, nd, shape, -1, 1, &A);
    if (st != CR_OK)
        return st;
    if (inv)
        for (size_t i = 0; i < shape[0]; i++) {
            ptrdiff_t off = (ptrdiff_t)(i * shape[0] + i);
            cr__store(A, off, cr__load(A, off) + 2.0 * (double)shape[0]);
        }
    else if (square && shape[0] > 1 && cr__rng_below(rng, 4) == 0)
        A->structure = cr__rng_below(rng, 2) ? CR_MAT_UPPER : CR_MAT_SYMMETRIC;
    double mag = cr__rng_unif(rng, 0.5, 2.0) * (cr__rng_below(rng, 2) ? 1 : -1);
    cr_value lam;
    switch (cr__rng_below(rng, 6)) {
    case 0:
        lam = cr_value_c128(cr__c(mag, cr__rng_unif(rng, -1, 1)));
        break;
    case 1:
        lam = cr_value_i64(mag > 0 ? 2 : -1);
        break;
    case 2:
        lam = dt == CR_DT_F32 ? cr_value_f32((float)mag) : cr_value_f64(mag);
        break;
    default:
        lam = cr_value_f64(mag);
        break;
    }
    args[o->lam_first ? 1 : 0] = cr_value_array(A);
    args[o->lam_first ? 0 : 1] = lam;
    return CR_OK;
}

#define U_SAMPLE(NAME, OP, FIRST)                    \
    static const u_sample k_us_##NAME = {OP, FIRST}; \
    static const cr_rule_test k_t_##NAME = {.sample = sample_uniform, .env = (void *)&k_us_##NAME};
U_SAMPLE(add_al, U_ADD, false)
U_SAMPLE(add_la, U_ADD, true)
U_SAMPLE(sub_al, U_SUB, false)
U_SAMPLE(sub_la, U_SUB, true)
U_SAMPLE(mul_al, U_MUL, false)
U_SAMPLE(mul_la, U_MUL, true)
U_SAMPLE(ldiv_al, U_LDIV, false)
U_SAMPLE(ldiv_la, U_LDIV, true)
U_SAMPLE(rdiv_al, U_RDIV, false)
U_SAMPLE(rdiv_la, U_RDIV, true)

cr_status cr__array_register_uniform(cr_registry *reg)
{
#define U_NUM (CR_M_F64 | CR_M_F32 | CR_M_C128 | CR_M_INT | CR_M_BOOL)
    static const cr_argspec al[2] = {{CR__M_FARRAY, NULL}, {U_NUM, NULL}};
    static const cr_argspec la[2] = {{U_NUM, NULL}, {CR__M_FARRAY, NULL}};
#undef U_NUM
    /* OP(A, λ) and OP(λ, A), in the order S1 (A, λ: al; λ, A: la) then S2, the second row
     * needing LAPACK where LAPACK2 is set. */
#define US_ROWS(OP, S1, S2, LIN, LAPACK2)                                                 \
    CR__ROW(OP##_uniform, OP##_uniform_frule, S1, 2, &k_t_##OP##_##S1, LIN, NULL, false), \
        CR__ROW(OP##_uniform, OP##_uniform_frule, S2, 2, &k_t_##OP##_##S2, LIN, NULL, LAPACK2)
    static const cr__array_rule k[] = {
        US_ROWS(add, al, la, CR_LINEAR, false),      US_ROWS(sub, al, la, CR_LINEAR, false),
        US_ROWS(mul, al, la, CR_MULTILINEAR, false), US_ROWS(ldiv, la, al, CR_NONLINEAR, true),
        US_ROWS(rdiv, al, la, CR_NONLINEAR, true),
    };
#undef US_ROWS
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
