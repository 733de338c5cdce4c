/*
 * The non-differentiable functions of <math.h> in the math family: rounding (floor, ceil,
 * trunc, round, nearbyint, rint and their integer forms), classification (fpclassify,
 * signbit, isnan, ...), logb, ilogb and the neighbours nextafter and nexttoward. They are
 * declared non-differentiable: their primals run, their tangents are NoTangent.
 */
#include "math_impl.h"

/* ========================================================================================
 * Non-differentiable functions: rounding, classification, neighbours
 * ======================================================================================== */

typedef enum nd_op {
    ND_FLOOR,
    ND_CEIL,
    ND_TRUNC,
    ND_ROUND,
    ND_NEARBYINT,
    ND_RINT,
    ND_LOGB,
    ND_LROUND,
    ND_LLROUND,
    ND_LRINT,
    ND_LLRINT,
    ND_ILOGB,
    ND_FPCLASSIFY,
    ND_SIGNBIT,
    ND_ISNAN,
    ND_ISINF,
    ND_ISFINITE,
    ND_ISNORMAL,
    ND_NEXTAFTER,
    ND_NEXTTOWARD,
    ND_COUNT
} nd_op;

typedef struct nd_info {
    nd_op op;
} nd_info;

static const nd_info k_nd_info[ND_COUNT] = {
    {ND_FLOOR},  {ND_CEIL},     {ND_TRUNC},      {ND_ROUND},     {ND_NEARBYINT},
    {ND_RINT},   {ND_LOGB},     {ND_LROUND},     {ND_LLROUND},   {ND_LRINT},
    {ND_LLRINT}, {ND_ILOGB},    {ND_FPCLASSIFY}, {ND_SIGNBIT},   {ND_ISNAN},
    {ND_ISINF},  {ND_ISFINITE}, {ND_ISNORMAL},   {ND_NEXTAFTER}, {ND_NEXTTOWARD},
};

/* A case of nd_primal: OP's result F(x) (in float when f32), real or an integer. */
#define ND_REAL(OP, F)                  \
    case OP:                            \
        r = f32 ? (double)F(xf) : F(x); \
        break
#define ND_INT(OP, F)                            \
    case OP:                                     \
        *out = cr_value_i64(f32 ? F(xf) : F(x)); \
        return CR_OK

/* The primal of the non-differentiable functions: real arguments, computed in float when
 * every floating argument is a float; real results keep that type, integer results are
 * int64 values, predicates bool. */
static cr_status nd_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                           cr_value *out)
{
    const cr_function *fn = f->u.func.fn;
    const nd_info *info = fn->udata;
    bool f32 = false;
    if (!real_args(args, nargs, &f32))
        return CR__FAIL(arena, CR_EINVAL, "%s takes real arguments", fn->name);
    double x = real_of(&args[0]);
    float xf = (float)x;
    double r = 0;
    switch (info->op) {
        ND_REAL(ND_FLOOR, floor);
        ND_REAL(ND_CEIL, ceil);
        ND_REAL(ND_TRUNC, trunc);
        ND_REAL(ND_ROUND, round);
        ND_REAL(ND_NEARBYINT, nearbyint);
        ND_REAL(ND_RINT, rint);
        ND_REAL(ND_LOGB, logb);
    case ND_NEXTAFTER:
        r = f32 ? (double)nextafter(xf, (float)real_of(&args[1])) : nextafter(x, real_of(&args[1]));
        break;
    case ND_NEXTTOWARD:
        r = f32 ? (double)nexttowardf(xf, (long double)real_of(&args[1]))
                : nexttoward(x, (long double)real_of(&args[1]));
        break;
        ND_INT(ND_LROUND, lround);
        ND_INT(ND_LLROUND, llround);
        ND_INT(ND_LRINT, lrint);
        ND_INT(ND_LLRINT, llrint);
        ND_INT(ND_ILOGB, ilogb);
        ND_INT(ND_FPCLASSIFY, fpclassify);
    case ND_SIGNBIT:
        *out = cr_value_bool(f32 ? signbit(xf) != 0 : signbit(x) != 0);
        return CR_OK;
    case ND_ISNAN:
        *out = cr_value_bool(isnan(x));
        return CR_OK;
    case ND_ISINF:
        *out = cr_value_bool(isinf(x));
        return CR_OK;
    case ND_ISFINITE:
        *out = cr_value_bool(isfinite(x));
        return CR_OK;
    case ND_ISNORMAL:
        *out = cr_value_bool(f32 ? isnormal(xf) : isnormal(x));
        return CR_OK;
    case ND_COUNT:
        break;
    }
    *out = f32 ? cr_value_f32((float)r) : cr_value_f64(r);
    return CR_OK;
}
#undef ND_REAL
#undef ND_INT

#define DEFINE_ND(NAME, OP, NIN)                                                    \
    static const cr_function NAME##_function = {                                    \
        .name = #NAME, .arity = NIN, .primal = nd_primal, .udata = &k_nd_info[OP]}; \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

DEFINE_ND(floor, ND_FLOOR, 1)
DEFINE_ND(ceil, ND_CEIL, 1)
DEFINE_ND(trunc, ND_TRUNC, 1)
DEFINE_ND(round, ND_ROUND, 1)
DEFINE_ND(nearbyint, ND_NEARBYINT, 1)
DEFINE_ND(rint, ND_RINT, 1)
DEFINE_ND(logb, ND_LOGB, 1)
DEFINE_ND(lround, ND_LROUND, 1)
DEFINE_ND(llround, ND_LLROUND, 1)
DEFINE_ND(lrint, ND_LRINT, 1)
DEFINE_ND(llrint, ND_LLRINT, 1)
DEFINE_ND(ilogb, ND_ILOGB, 1)
DEFINE_ND(fpclassify, ND_FPCLASSIFY, 1)
DEFINE_ND(signbit, ND_SIGNBIT, 1)
DEFINE_ND(isnan, ND_ISNAN, 1)
DEFINE_ND(isinf, ND_ISINF, 1)
DEFINE_ND(isfinite, ND_ISFINITE, 1)
DEFINE_ND(isnormal, ND_ISNORMAL, 1)
DEFINE_ND(nextafter, ND_NEXTAFTER, 2)
DEFINE_ND(nexttoward, ND_NEXTTOWARD, 2)

static const cr_function *const k_nondiff1[] = {
    &floor_function,      &ceil_function,     &trunc_function,  &round_function,
    &nearbyint_function,  &rint_function,     &logb_function,   &lround_function,
    &llround_function,    &lrint_function,    &llrint_function, &ilogb_function,
    &fpclassify_function, &signbit_function,  &isnan_function,  &isinf_function,
    &isfinite_function,   &isnormal_function,
};

static const cr_function *const k_nondiff2[] = {&nextafter_function, &nexttoward_function};

cr_status cr__math_register_nondiff(cr_registry *reg)
{
    cr_status st;
    for (size_t i = 0; i < sizeof k_nondiff1 / sizeof k_nondiff1[0]; i++)
        if ((st = cr_registry_non_differentiable(reg, k_nondiff1[i], k_real_args, 1, false)) !=
            CR_OK)
            return st;
    for (size_t i = 0; i < sizeof k_nondiff2 / sizeof k_nondiff2[0]; i++)
        if ((st = cr_registry_non_differentiable(reg, k_nondiff2[i], k_real_args, 2, false)) !=
            CR_OK)
            return st;
    return CR_OK;
}
