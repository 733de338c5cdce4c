/*
 * Private to the scalar rule families (src/rulesets/scalar/): the macros that declare a
 * row's function value and its test registration, the making of a complex number, and the
 * projection of a real argument's cotangent.
 */
#ifndef CR_SCALAR_ROWS_IMPL_H
#define CR_SCALAR_ROWS_IMPL_H

#include <string.h>

#include "../../rules/rules_impl.h"

/* re + i im, keeping the signs of zeros (C11's CMPLX is missing from some compilers: clang
 * with glibc). C11 lays a complex out as two doubles, real part first. */
static inline cr_complex cr__cplx(double re, double im)
{
    double parts[2] = {re, im};
    cr_complex z;
    memcpy(&z, parts, sizeof z);
    return z;
}

/* Declares the cr_function of row NAME_row, named STR with NIN arguments, and its exported
 * function value cr_fn_NAME. */
#define DEFINE_FN(NAME, STR, NIN)                                                        \
    static const cr_function NAME##_function = CR_SCALAR_FUNCTION(STR, NAME##_row, NIN); \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

/* Number of points of a hard-point array of NIN coordinates each. */
#define NPTS(PTS, NIN) (sizeof(PTS) / sizeof(PTS)[0] / (NIN))

/* The test registration of row NAME from the arrays NAME_lo, NAME_hi (sampling box, one
 * bound per argument) and NAME_pts (hard points, nin coordinates each). */
#define TESTREG(NAME)                                                          \
    .test = {.lo = NAME##_lo,                                                  \
             .hi = NAME##_hi,                                                  \
             .npoints = sizeof NAME##_pts / sizeof NAME##_pts[0] / NAME##_nin, \
             .points = NAME##_pts}

/* Whether a value of kind k is an integer (i64, i32) or a bool: its tangent is NoTangent. */
static inline bool cr__is_int_kind(cr_kind k)
{
    return k == CR_KIND_I64 || k == CR_KIND_I32 || k == CR_KIND_BOOL;
}

/* ProjectTo a real argument of kind k: the cotangent g as an f64 or f32 tangent, NoTangent
 * for the other kinds (integers, bools). */
static inline cr_tangent cr__project_real(cr_kind k, double g)
{
    switch (k) {
    case CR_KIND_F64:
        return cr_tangent_f64(g);
    case CR_KIND_F32:
        return cr_tangent_f32((float)g);
    default:
        return cr_tangent_none();
    }
}

/* Row NAME of one output under another name of the real row OF (Julia's aliases: sigmoid is
 * logistic, softplus is log1pexp, rem is fmod): OF's evaluations and source, NAME's pullback
 * name, its notes, and the test registration given as the trailing `.test = ...`. */
#define ALIAS_ROW(NAME, OF, NIN, NOTES, ...)                                      \
    static const cr_scalar_rule NAME##_row = {.name = #NAME,                      \
                                              .nin = NIN,                         \
                                              .nout = 1,                          \
                                              .f64 = OF##_f64,                    \
                                              .f32 = OF##_f32,                    \
                                              .c128 = NULL,                       \
                                              .primal_src = OF##_primal_src,      \
                                              .partials_src = OF##_partials_src,  \
                                              .pullback_name = #NAME "_pullback", \
                                              .notes = NOTES,                     \
                                              __VA_ARGS__};

#endif /* CR_SCALAR_ROWS_IMPL_H */
