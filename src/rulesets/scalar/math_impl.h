/*
 * Private pieces shared by the files of the math rule family (math.c and the files it
 * registers: trig.c, exp_log.c, float_arith.c, nondiff.c): correctly rounded constants, the
 * per-type dispatch of the rows' helpers, and the reading of real arguments.
 */
#ifndef CR_MATH_IMPL_H
#define CR_MATH_IMPL_H

#include <float.h>
#include <limits.h>
#include <string.h>

#include <chainrules/rules_math.h>

#include "rows_impl.h"

/* ---- Constants ------------------------------------------------------------------------ */

/* Pairs HI + LO are the constant to about 107 bits (HI is the nearest double, LO the
 * nearest double to the remainder); they were computed with MPFR at 512 bits. */
#define PI_HI      0x1.921fb54442d18p+1 /* pi */
#define PI_LO      0x1.1a62633145c07p-53
#define D2R_HI     0x1.1df46a2529d39p-6 /* pi/180 */
#define D2R_LO     0x1.5c1d8becdd291p-62
#define R2D_HI     0x1.ca5dc1a63c1f8p+5 /* 180/pi */
#define R2D_LO     -0x1.1e7ab456405f9p-49
#define LN2        0x1.62e42fefa39efp-1 /* log(2), rounded */
#define LN10       0x1.26bb1bbb55516p+1 /* log(10), rounded */
#define TWO_SQRTPI 0x1.20dd750429b6dp+0 /* 2/sqrt(pi), rounded */

/* NaN, infinity and the imaginary unit as double (the <math.h> macros are float). */
#define DNAN ((double)NAN)
#define DINF ((double)INFINITY)
#define DI   ((cr_complex)I)

/* Dispatch a private helper on the type of its first argument: NAME_f for float, NAME_c
 * for double complex, NAME_d otherwise (double). The rows' bodies are instantiated for
 * each type, so a helper gets the type of the instantiation. */
#define GEN(NAME, X) _Generic((X), float : NAME##_f, cr_complex : NAME##_c, default : NAME##_d)
/* The same for real-only helpers. */
#define GENR(NAME, X) _Generic((X), float : NAME##_f, default : NAME##_d)

/* A float helper that evaluates the double helper and rounds once: the float rows are then
 * as accurate as the double ones allow. */
#define FLOAT_VIA_DOUBLE(NAME)             \
    static float NAME##_f(float x)         \
    {                                      \
        return (float)NAME##_d((double)x); \
    }
#define FLOAT_VIA_DOUBLE2(NAME)                       \
    static float NAME##_f(float x, float y)           \
    {                                                 \
        return (float)NAME##_d((double)x, (double)y); \
    }

/* NAME_d and NAME_f: the <tgmath.h> function NAME itself, in double and in float. */
#define LIBM_DF(NAME)                \
    static double NAME##_d(double x) \
    {                                \
        return NAME(x);              \
    }                                \
    static float NAME##_f(float x)   \
    {                                \
        return NAME(x);              \
    }

/* x * (HI + LO) with one rounding of the sum: fma(x, HI, x*LO). */
static inline double mul_dd(double x, double hi, double lo)
{
    return fma(x, hi, x * lo);
}

/* ---- Real arguments of the hand-written rules --------------------------------------------- */

/* The element type of a computation over real arguments: f32 when every floating argument
 * is f32 (integers join it), f64 otherwise. False for a non-real argument. */
static inline bool real_args(const cr_value *args, size_t nargs, bool *f32)
{
    unsigned has;
    size_t bad;
    if (!cr__number_kinds(args, nargs, &has, &bad) || (has & CR__HAS_C128))
        return false;
    *f32 = has == CR__HAS_F32;
    return true;
}

/* A real argument's number (checked by real_args); NaN for a non-number. */
static inline double real_of(const cr_value *v)
{
    cr_complex z;
    return cr__value_number(v, &z) ? creal(z) : DNAN;
}

/* The matchers of the hand-written rules' real arguments (take the first n). */
static const cr_argspec k_real_args[4] = {{CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL},
                                          {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL},
                                          {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL},
                                          {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL}};

/* sin(pi x) and cos(pi x), exactly reduced (trig.c; digamma's reflection uses them). */
CR_INTERNAL void cr__sincospi(double x, double *s, double *c);

/* ---- Sub-registrations of cr__family_math (math.c) ---------------------------------------- */

/* frexp, remquo and hypot of three or more arguments (float_arith.c). */
CR_INTERNAL cr_status cr__math_register_hand(cr_registry *reg);
/* The non-differentiable functions: rounding, classification, neighbours (nondiff.c). */
CR_INTERNAL cr_status cr__math_register_nondiff(cr_registry *reg);

#endif /* CR_MATH_IMPL_H */
