/*
 * vect(x1, ..., xn): Julia's Base.vect, the vector [x1, x2, ..., xn] of n numbers, with its
 * frule, rrule (linear: element k of the cotangent is x_k's cotangent), second-order class
 * and test registration. The tape's cr_av_pack records a pack of scalar variables on
 * second-order tapes and in prepared gradients as calls of vect of up to 16 numbers each
 * (src/ad/array_pack.c).
 */
#include "../array_impl.h"
#include "contract.h"

typedef struct vect_env {
    size_t n;
    cr_dtype wdt;
    cr_dtype dt[]; /* each argument's float dtype, 0 for an integer or bool */
} vect_env;

/* The result's element type: the float arguments promoted, f64 when none is float. */
static cr_dtype vect_dtype(const cr_value *args, size_t nargs)
{
    cr_dtype d = 0;
    for (size_t k = 0; k < nargs; k++)
        d = cr__promote(d, cr__value_dtype(&args[k]));
    return d == 0 ? CR_DT_F64 : d;
}

/* The primal: the vector *y of the arguments, of element type *dt (vect_dtype). */
static cr_status vect_values(cr_arena *arena, const cr_value *args, size_t nargs, cr_dtype *dt,
                             cr_value *y)
{
    *dt = vect_dtype(args, nargs);
    if (nargs == 0)
        return CR__FAIL(arena, CR_EINVAL, "vect: no arguments");
    cr_array *o;
    cr_status st = cr__new(arena, *dt, 1, &nargs, false, &o);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < nargs; k++)
        cr__store(o, (ptrdiff_t)k, cr__scalar_of(&args[k]));
    *y = cr_value_array(o);
    return CR_OK;
}

static cr_status vect_pullback(CR__PULLBACK_PARAMS)
{
    const vect_env *e = env;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "vect_pullback", *dy, 1, &e->n, e->wdt, &g);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < e->n && k + 1 < nx; k++) {
        if (e->dt[k] == 0)
            continue; /* an integer or a bool: NoTangent */
        dx[k + 1] =
            g == NULL ? cr_tangent_zero() : cr__scalar_tangent(e->dt[k], cr__load(g, (ptrdiff_t)k));
    }
    return CR_OK;
}

static cr_status vect_rrule(CR__RRULE_PARAMS)
{
    cr_dtype dt;
    cr_status st = vect_values(arena, args, nargs, &dt, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    size_t bytes;
    if ((st = cr__ck_mul(cr_arena_ctx(arena), "vect", nargs, sizeof(cr_dtype), &bytes)) != CR_OK ||
        (st = cr__ck_add(cr_arena_ctx(arena), "vect", bytes, sizeof(vect_env), &bytes)) != CR_OK)
        return st;
    vect_env *e = cr_arena_alloc(arena, bytes, _Alignof(vect_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    e->n = nargs;
    e->wdt = cr__work(dt);
    for (size_t k = 0; k < nargs; k++)
        e->dt[k] = cr__value_dtype(&args[k]);
    *pb = (cr_pullback){vect_pullback, e, "vect_pullback", nargs + 1};
    return CR_OK;
}

/* frule: ẏ = [ẋ1, ..., ẋn]. */
static cr_status vect_frule(CR__FRULE_PARAMS)
{
    cr_dtype dt;
    cr_array *t = NULL;
    cr_status st = vect_values(arena, args, nargs, &dt, y);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < nargs; k++) {
        if (cr__value_dtype(&args[k]) == 0)
            continue;
        cr_complex v;
        bool nz;
        if ((st = cr__tan_scalar(arena, "vect", dargs[k + 1], &v, &nz)) != CR_OK)
            return st;
        if (!nz)
            continue;
        if (t == NULL && (st = cr__new(arena, cr__work(dt), 1, &nargs, true, &t)) != CR_OK)
            return st;
        cr__store(t, (ptrdiff_t)k, v);
    }
    if (t == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    return cr_project_tangent(arena, y, cr_tangent_array(t), dy);
}

CR__ARRAY_FN(vect, "vect", -1)

/* Numbers: f64 mostly, sometimes f32, c128, an integer or a bool (the tester draws as many as
 * the signature lists; tests/rulesets/test_rules_einsum.c tests other counts). */
static cr_status sample_vect(CR__SAMPLE_PARAMS)
{
    for (size_t k = 0; k < nargs; k++) {
        double re = cr__rng_unif(rng, -2, 2), im = cr__rng_unif(rng, -2, 2);
        switch (cr__rng_below(rng, 12)) {
        case 0:
            args[k] = cr_value_f32((float)re);
            break;
        case 1:
            args[k] = cr_value_c128(cr__c(re, im));
            break;
        case 2:
            args[k] = cr_value_i64((int64_t)cr__rng_below(rng, 7) - 3);
            break;
        case 3:
            args[k] = cr_value_bool(re > 0);
            break;
        default:
            args[k] = cr_value_f64(re);
        }
    }
    return CR_OK;
}

static const cr_rule_test k_test_vect = {.sample = sample_vect};

cr_status cr__family_vect(cr_registry *reg)
{
    static const cr_argspec num[1] = {{CR__M_NUM, NULL}};
    return cr__add_rule_so(reg, &vect_function, num, 1, true, vect_frule, vect_rrule, &k_test_vect,
                           CR_LINEAR, NULL);
}
