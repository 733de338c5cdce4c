/*
 * Tests of friendly tangents: a C struct's real fields (nested struct and float fields
 * included) as tape inputs, and the gradient written back into a struct of the same C type
 * and as the raw structural tangent. Derivatives are checked against central differences
 * of the same function in plain C, field by field.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#define FD_RTOL 1e-7

typedef struct inner {
    float scale;
    int64_t id;
    double shift;
} inner;

typedef struct model {
    double a;
    int n;
    inner in;
    double b;
    bool flag;
} model;

static const cr_field inner_fields[] = {
    {"scale", offsetof(inner, scale), CR_KIND_F32, NULL},
    {"id", offsetof(inner, id), CR_KIND_I64, NULL},
    {"shift", offsetof(inner, shift), CR_KIND_F64, NULL},
};
static const cr_type inner_type = {"inner", sizeof(inner), 3, inner_fields};
static const cr_field model_fields[] = {
    {"a", offsetof(model, a), CR_KIND_F64, NULL},
    {"n", offsetof(model, n), CR_KIND_I32, NULL},
    {"in", offsetof(model, in), CR_KIND_STRUCT, &inner_type},
    {"b", offsetof(model, b), CR_KIND_F64, NULL},
    {"flag", offsetof(model, flag), CR_KIND_BOOL, NULL},
};
static const cr_type model_type = {"model", sizeof(model), 5, model_fields};

/* f(m) = a sin(b) + scale exp(shift a) + n / (1 + b^2) */
static double f_c(const model *m)
{
    return m->a * sin(m->b) + (double)m->in.scale * exp(m->in.shift * m->a) +
           (double)m->n / (1 + m->b * m->b);
}

static cr_var f_t(cr_tape *t, const cr_var *v, const model *m)
{
    cr_var a = cr_tape_struct_field(&model_type, v, "a");
    cr_var b = cr_tape_struct_field(&model_type, v, "b");
    cr_var scale = cr_tape_struct_field(&model_type, v, "in.scale");
    cr_var shift = cr_tape_struct_field(&model_type, v, "in.shift");
    cr_var r =
        cr_add(t, cr_mul(t, a, cr_sin(t, b)), cr_mul(t, scale, cr_exp(t, cr_mul(t, shift, a))));
    return cr_add(t, r,
                  cr_div(t, cr_const((double)m->n), cr_add(t, cr_const(1.0), cr_mul(t, b, b))));
}

/* d f / d field by central differences, perturbing one field of a copy. */
static double fd_field(const model *m, size_t which)
{
    double h = 1e-5, s = 0;
    for (int sgn = -1; sgn <= 1; sgn += 2) {
        model p = *m;
        double d = sgn * h;
        switch (which) {
        case 0:
            p.a += d;
            break;
        case 1:
            p.in.scale += (float)d;
            break;
        case 2:
            p.in.shift += d;
            break;
        default:
            p.b += d;
            break;
        }
        /* the step actually taken for the float field */
        double taken = which == 1 ? (double)p.in.scale - (double)m->in.scale : d;
        s += sgn * f_c(&p) / (2 * fabs(taken));
    }
    return s;
}

static void test_friendly_gradient(void **state)
{
    fixture *f = *state;
    model m = {
        .a = 0.7, .n = 3, .in = {.scale = 1.5f, .id = 42, .shift = -0.4}, .b = 1.1, .flag = true};
    assert_int_equal(cr_type_real_fields(&model_type), 4);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var v[4];
    assert_int_equal(cr_tape_struct_inputs(t, &model_type, &m, v, 4), CR_OK);
    assert_close(v[1].v, 1.5, 0); /* depth-first: a, in.scale, in.shift, b */
    assert_close(v[3].v, 1.1, 0);
    cr_var y = f_t(t, v, &m);
    assert_close(y.v, f_c(&m), 1e-6);

    /* Written back into a model */
    model g;
    memset(&g, 0x55, sizeof g);
    g.flag = true;
    assert_int_equal(cr_tape_gradient_struct(t, y, &model_type, v, &g), CR_OK);
    assert_close(g.a, fd_field(&m, 0), FD_RTOL);
    assert_close((double)g.in.scale, fd_field(&m, 1), 1e-4); /* an f32 field: float accuracy */
    assert_close(g.in.shift, fd_field(&m, 2), FD_RTOL);
    assert_close(g.b, fd_field(&m, 3), FD_RTOL);
    assert_int_equal(g.n, 0);
    assert_true(g.in.id == 0);
    assert_false(g.flag);

    /* The raw structural tangent */
    cr_tangent tan;
    assert_int_equal(cr_tape_gradient_tangent(t, y, &model_type, v, f->arena, &tan), CR_OK);
    assert_int_equal(tan.tag, CR_TAN_STRUCT);
    assert_ptr_equal(tan.u.s.type, &model_type);
    cr_tangent ta, tn, tin, tscale, tid;
    assert_int_equal(cr_tangent_getfield(tan, "a", &ta), CR_OK);
    assert_int_equal(cr_tangent_getfield(tan, "n", &tn), CR_OK);
    assert_int_equal(cr_tangent_getfield(tan, "in", &tin), CR_OK);
    assert_int_equal(ta.tag, CR_TAN_F64);
    assert_close(ta.u.f64, g.a, 0);
    assert_int_equal(tn.tag, CR_TAN_NONE);
    assert_int_equal(tin.tag, CR_TAN_STRUCT);
    assert_int_equal(cr_tangent_getfield(tin, "scale", &tscale), CR_OK);
    assert_int_equal(cr_tangent_getfield(tin, "id", &tid), CR_OK);
    assert_int_equal(tscale.tag, CR_TAN_F32); /* precision is kept */
    assert_true(tscale.u.f32 == g.in.scale);
    assert_int_equal(tid.tag, CR_TAN_NONE);
    /* Into the tape's own arena as well (small structs). */
    assert_int_equal(cr_tape_gradient_tangent(t, y, &model_type, v, cr_tape_arena(t), &tan), CR_OK);
    assert_int_equal(cr_tangent_getfield(tan, "b", &ta), CR_OK);
    assert_close(ta.u.f64, g.b, 0);
    cr_tape_free(t);
}

static void test_friendly_errors(void **state)
{
    fixture *f = *state;
    model m = {0};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var v[4];
    assert_int_equal(cr_tape_struct_inputs(t, &model_type, &m, v, 3), CR_EINVAL);
    assert_non_null(strstr(cr_tape_errmsg(t), "4 real fields"));
    cr_tape_reset(t);
    assert_int_equal(cr_tape_struct_inputs(t, &model_type, &m, v, 4), CR_OK);
    assert_true(isnan(cr_tape_struct_field(&model_type, v, "n").v));       /* not real */
    assert_true(isnan(cr_tape_struct_field(&model_type, v, "in.nope").v)); /* no such field */
    assert_true(isnan(cr_tape_struct_field(&model_type, v, "a.b").v));     /* not a struct */
    assert_int_equal(cr_tape_struct_field(&model_type, v, "in.shift").idx, v[2].idx);
    static const cr_field bad_fields[] = {{"s", 0, CR_KIND_STRUCT, NULL}};
    static const cr_type bad = {"bad", 8, 1, bad_fields};
    cr_tape_reset(t);
    assert_int_equal(cr_tape_struct_inputs(t, &bad, &m, v, 4), CR_EINVAL);
    assert_non_null(strstr(cr_tape_errmsg(t), "without a descriptor"));
    assert_int_equal(cr_tape_gradient_struct(t, cr_const(0), &model_type, v, NULL), CR_EINVAL);
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_friendly_gradient, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_friendly_errors, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
