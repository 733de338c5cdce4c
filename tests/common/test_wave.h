/*
 * wave(x) = x sin(x): a user function for the engine tests, with its primal (f64 or f32
 * argument) and an implementation written against the tape, registered as an overlay
 * (cr_engine_overlay(eng, &wave_fn, wave_ad, 1, NULL)).
 */
#ifndef TEST_WAVE_H
#define TEST_WAVE_H

#include <math.h>

#include <chainrules.h>

static cr_status wave_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    double x = args[0].kind == CR_KIND_F32 ? (double)args[0].u.f32 : args[0].u.f64;
    *out = cr_value_f64(x * sin(x));
    return CR_OK;
}
static const cr_function wave_fn = {.name = "wave", .arity = 1, .primal = wave_primal};

static cr_status wave_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, x[0], cr_sin(t, x[0]));
    return cr_tape_status(t);
}

#endif /* TEST_WAVE_H */
