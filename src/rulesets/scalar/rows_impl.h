/*
 * Private to the scalar rule families (src/rulesets/scalar/): the macros that declare a
 * row's function value and its test registration, and the projection of a real argument's
 * cotangent (complex numbers are made by cr__c, rules_impl.h).
 */
#ifndef CR_SCALAR_ROWS_IMPL_H
#define CR_SCALAR_ROWS_IMPL_H

#include "../../rules/rules_impl.h"

/* Declares the cr_function of row NAME_row, named STR with NIN arguments, and its exported
 * function value cr_fn_NAME. */
#define DEFINE_FN(NAME, STR, NIN)                                                        \
    static const cr_function NAME##_function = CR_SCALAR_FUNCTION(STR, NAME##_row, NIN); \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

/* Row NAME of NIN real arguments and one output: the evaluations of CR_SCALAR_EVALS_REAL, the
 * statements PRIMAL (Y[0] = ...) and PARTIALS (D[0] = ...; D[1] = ...), with those texts as the
 * row's sources (stringified here, before any macro in them is expanded), the row with the
 * designated initialisers that follow (.test, .notes) and its function value cr_fn_NAME. */
#define REAL_ROW(NAME, NIN, PRIMAL, PARTIALS, ...)                                     \
    CR__SCALAR_EVAL(NAME##_f64, double, NIN, 1, PRIMAL, PARTIALS)                      \
    CR__SCALAR_EVAL_F32(NAME##_f32, NIN, 1, PRIMAL, PARTIALS)                          \
    CR__SCALAR_SRC(NAME, NIN, 1, #PRIMAL, #PARTIALS)                                   \
    static const cr_scalar_rule NAME##_row = CR_SCALAR_ROW_REAL_EX(NAME, __VA_ARGS__); \
    DEFINE_FN(NAME, #NAME, NIN)
/* Row NAME of one argument (real or complex: CR_SCALAR_EVALS) and one output, Y[0] = VALUE and
 * D[0] = DERIV, as REAL_ROW1 does for real rows. */
#define ROW1(NAME, VALUE, DERIV, ...)                                             \
    CR__SCALAR_EVAL(NAME##_f64, double, 1, 1, Y[0] = VALUE, D[0] = DERIV)         \
    CR__SCALAR_EVAL_F32(NAME##_f32, 1, 1, Y[0] = VALUE, D[0] = DERIV)             \
    CR__SCALAR_EVAL(NAME##_c128, cr_complex, 1, 1, Y[0] = VALUE, D[0] = DERIV)    \
    CR__SCALAR_SRC(NAME, 1, 1, "Y[0] = " #VALUE, "D[0] = " #DERIV)                \
    static const cr_scalar_rule NAME##_row = CR_SCALAR_ROW_EX(NAME, __VA_ARGS__); \
    DEFINE_FN(NAME, #NAME, 1)
/* The same for one argument, Y[0] = VALUE and D[0] = DERIV. */
#define REAL_ROW1(NAME, VALUE, DERIV, ...)                                             \
    CR__SCALAR_EVAL(NAME##_f64, double, 1, 1, Y[0] = VALUE, D[0] = DERIV)              \
    CR__SCALAR_EVAL_F32(NAME##_f32, 1, 1, Y[0] = VALUE, D[0] = DERIV)                  \
    CR__SCALAR_SRC(NAME, 1, 1, "Y[0] = " #VALUE, "D[0] = " #DERIV)                     \
    static const cr_scalar_rule NAME##_row = CR_SCALAR_ROW_REAL_EX(NAME, __VA_ARGS__); \
    DEFINE_FN(NAME, #NAME, 1)

/* The entry {function, row} of row NAME in a table of the family's rows. */
#define FN_ROW(NAME)                  \
    {                                 \
        &NAME##_function, &NAME##_row \
    }

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
