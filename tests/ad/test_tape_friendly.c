/*
 * Tests of friendly tangents: a C struct's real fields (nested struct and float fields
 * included) and array fields as tape inputs, and the gradient written back into a struct of
 * the same C type and as the raw structural tangent. Derivatives are checked against
 * central differences of the same function in plain C, field by field and element by
 * element.
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

/* ---- Structs with array fields ---------------------------------------------------------- */

#define NW 4
#define NB 3

typedef struct layer {
    cr_array b; /* f32 */
    float gain;
} layer;

typedef struct net {
    double scale;
    cr_array w; /* f64 */
    int n;
    layer out;
} net;

static const cr_field layer_fields[] = {
    {"b", offsetof(layer, b), CR_KIND_ARRAY, NULL},
    {"gain", offsetof(layer, gain), CR_KIND_F32, NULL},
};
static const cr_type layer_type = {"layer", sizeof(layer), 2, layer_fields};
static const cr_field net_fields[] = {
    {"scale", offsetof(net, scale), CR_KIND_F64, NULL},
    {"w", offsetof(net, w), CR_KIND_ARRAY, NULL},
    {"n", offsetof(net, n), CR_KIND_I32, NULL},
    {"out", offsetof(net, out), CR_KIND_STRUCT, &layer_type},
};
static const cr_type net_type = {"net", sizeof(net), 4, net_fields};

static const double k_c[NW] = {0.3, -1.2, 0.8, 2.0};

/* g(m) = scale * dot(w, c) + gain * dot(b, b) + (sum w)^2 + n, in plain C */
static double g_c(const net *m)
{
    const double *w = m->w.data;
    const float *b = m->out.b.data;
    double d = 0, bb = 0, sw = 0;
    for (size_t i = 0; i < NW; i++) {
        d += w[i] * k_c[i];
        sw += w[i];
    }
    for (size_t i = 0; i < NB; i++)
        bb += (double)b[i] * (double)b[i];
    return m->scale * d + (double)m->out.gain * bb + sw * sw + m->n;
}

static cr_var g_t(cr_tape *t, const cr_var *v, const cr_avar *av, const net *m)
{
    static double cbuf[NW];
    static cr_array ca;
    memcpy(cbuf, k_c, sizeof cbuf);
    ca = cr_array_vector(cbuf, NW);
    cr_var scale = cr_tape_struct_field(&net_type, v, "scale");
    cr_var gain = cr_tape_struct_field(&net_type, v, "out.gain");
    cr_avar w = cr_tape_struct_array_field(&net_type, av, "w");
    cr_avar b = cr_tape_struct_array_field(&net_type, av, "out.b");
    cr_var sw = cr_av_sum(t, w);
    cr_var r = cr_add(t, cr_mul(t, scale, cr_av_dot(t, w, cr_av_const(&ca))),
                      cr_mul(t, gain, cr_av_dot(t, b, b)));
    return cr_add(t, cr_add(t, r, cr_mul(t, sw, sw)), cr_const((double)m->n));
}

/* d g / d (field `which`, element i) by central differences on copies of the data,
 * divided by the steps actually taken (float fields round them). */
static double fd_net(const net *m, int which, size_t i)
{
    double h = 1e-4, fv[2], xv[2];
    for (int k = 0; k < 2; k++) {
        double w[NW], d = k == 0 ? -h : h;
        float b[NB];
        memcpy(w, m->w.data, sizeof w);
        memcpy(b, m->out.b.data, sizeof b);
        net p = *m;
        p.w.data = w;
        p.out.b.data = b;
        switch (which) {
        case 0:
            xv[k] = p.scale += d;
            break;
        case 1:
            xv[k] = w[i] += d;
            break;
        case 2:
            b[i] += (float)d;
            xv[k] = (double)b[i];
            break;
        default:
            p.out.gain += (float)d;
            xv[k] = (double)p.out.gain;
            break;
        }
        fv[k] = g_c(&p);
    }
    return (fv[1] - fv[0]) / (xv[1] - xv[0]);
}

typedef struct net_case {
    double w[NW];
    float b[NB];
    net m;
} net_case;

static void net_setup(net_case *c)
{
    const double w0[NW] = {0.5, -0.25, 1.5, 0.75};
    const float b0[NB] = {1.25f, -0.5f, 2.0f};
    memcpy(c->w, w0, sizeof w0);
    memcpy(c->b, b0, sizeof b0);
    size_t nb = NB;
    c->m.scale = 1.3;
    c->m.w = cr_array_vector(c->w, NW);
    c->m.n = 7;
    assert_int_equal(cr_array_view_init(&c->m.out.b, c->b, CR_DT_F32, 1, &nb, NULL), CR_OK);
    c->m.out.gain = 0.5f;
}

static void test_friendly_arrays(void **state)
{
    fixture *f = *state;
    net_case c;
    net_setup(&c);
    assert_int_equal(cr_type_array_fields(&net_type), 2);
    assert_int_equal(cr_type_real_fields(&net_type), 2);
    assert_int_equal(cr_type_array_fields(NULL), 0);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var v[2];
    cr_avar av[2];
    assert_int_equal(cr_tape_struct_inputs(t, &net_type, &c.m, v, 2), CR_OK);
    assert_int_equal(cr_tape_struct_array_inputs(t, &net_type, &c.m, av, 2), CR_OK);
    assert_ptr_equal(av[0].a, &c.m.w); /* depth first: w, out.b */
    assert_ptr_equal(av[1].a, &c.m.out.b);
    assert_int_equal(cr_tape_struct_array_field(&net_type, av, "out.b").idx, av[1].idx);
    assert_null(cr_tape_struct_array_field(&net_type, av, "scale").a); /* not an array */
    assert_null(cr_tape_struct_array_field(&net_type, av, "out.c").a); /* no such field */
    assert_null(cr_tape_struct_array_field(&net_type, av, "w.x").a);   /* not a struct */
    cr_var y = g_t(t, v, av, &c.m);
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_close(y.v, g_c(&c.m), 1e-6);

    /* Written back into a net whose array fields describe the caller's buffers. */
    double gw[NW];
    float gb[NB];
    net g;
    memset(&g, 0x55, sizeof g);
    size_t nb = NB;
    g.w = cr_array_vector(gw, NW);
    assert_int_equal(cr_array_view_init(&g.out.b, gb, CR_DT_F32, 1, &nb, NULL), CR_OK);
    assert_int_equal(cr_tape_gradient_struct_arrays(t, y, &net_type, v, av, &g), CR_OK);
    assert_close(g.scale, fd_net(&c.m, 0, 0), FD_RTOL);
    assert_close((double)g.out.gain, fd_net(&c.m, 3, 0), 1e-6);
    assert_int_equal(g.n, 0);
    assert_ptr_equal(g.w.data, gw); /* the descriptors are the caller's */
    for (size_t i = 0; i < NW; i++)
        assert_close(gw[i], fd_net(&c.m, 1, i), FD_RTOL);
    for (size_t i = 0; i < NB; i++)
        assert_close((double)gb[i], fd_net(&c.m, 2, i), 1e-6);

    /* The real fields alone leave the array fields' descriptors and data alone. */
    net g2 = g;
    double keep = gw[0];
    assert_int_equal(cr_tape_gradient_struct(t, y, &net_type, v, &g2), CR_OK);
    assert_close(g2.scale, g.scale, 0);
    assert_ptr_equal(g2.w.data, gw);
    assert_close(gw[0], keep, 0);

    /* The raw structural tangent, in another arena and in the tape's. */
    cr_arena *arenas[2] = {f->arena, cr_tape_arena(t)};
    for (int k = 0; k < 2; k++) {
        cr_tangent tan, tw, tout, tb, tgain, ts, tw0;
        assert_int_equal(cr_tape_gradient_tangent_arrays(t, y, &net_type, v, av, arenas[k], &tan),
                         CR_OK);
        assert_int_equal(tan.tag, CR_TAN_STRUCT);
        assert_int_equal(cr_tangent_getfield(tan, "w", &tw), CR_OK);
        assert_int_equal(cr_tangent_getfield(tan, "scale", &ts), CR_OK);
        assert_int_equal(cr_tangent_getfield(tan, "out", &tout), CR_OK);
        assert_int_equal(cr_tangent_getfield(tout, "b", &tb), CR_OK);
        assert_int_equal(cr_tangent_getfield(tout, "gain", &tgain), CR_OK);
        assert_int_equal(tw.tag, CR_TAN_ARRAY);
        assert_int_equal(tb.tag, CR_TAN_ARRAY);
        assert_int_equal(tb.u.arr->dtype, CR_DT_F32); /* the field's dtype is kept */
        assert_int_equal(tgain.tag, CR_TAN_F32);
        assert_close(ts.u.f64, g.scale, 0);
        for (size_t i = 0; i < NW; i++)
            assert_close(((const double *)tw.u.arr->data)[i], gw[i], 0);
        for (size_t i = 0; i < NB; i++)
            assert_true(((const float *)tb.u.arr->data)[i] == gb[i]);
        /* The plain form gives the array fields ZeroTangent. */
        assert_int_equal(cr_tape_gradient_tangent(t, y, &net_type, v, arenas[k], &tan), CR_OK);
        assert_int_equal(cr_tangent_getfield(tan, "w", &tw0), CR_OK);
        assert_true(cr_tangent_is_zero(tw0));
    }
    cr_tape_free(t);
}

static void test_friendly_array_errors(void **state)
{
    fixture *f = *state;
    net_case c;
    net_setup(&c);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var v[2];
    cr_avar av[2];
    assert_int_equal(cr_tape_struct_array_inputs(t, &net_type, &c.m, av, 1), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "net has 2 array fields, room for 1");
    cr_tape_reset(t);
    assert_int_equal(cr_tape_struct_array_inputs(t, &net_type, NULL, av, 2), CR_EINVAL);
    cr_tape_reset(t);
    /* An array field that is not a float array */
    int64_t ibuf[NW] = {0};
    net bad = c.m;
    size_t nw = NW;
    assert_int_equal(cr_array_view_init(&bad.w, ibuf, CR_DT_I64, 1, &nw, NULL), CR_OK);
    assert_int_equal(cr_tape_struct_array_inputs(t, &net_type, &bad, av, 2), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "not a float array");
    cr_tape_reset(t);

    assert_int_equal(cr_tape_struct_inputs(t, &net_type, &c.m, v, 2), CR_OK);
    assert_int_equal(cr_tape_struct_array_inputs(t, &net_type, &c.m, av, 2), CR_OK);
    cr_var y = g_t(t, v, av, &c.m);
    double gw[NW], gw_short[NW - 1];
    float gb[NB];
    size_t nb = NB;
    net g;
    memset(&g, 0, sizeof g);
    assert_int_equal(cr_array_view_init(&g.out.b, gb, CR_DT_F32, 1, &nb, NULL), CR_OK);
    /* grad's w describes no memory */
    assert_int_equal(cr_tape_gradient_struct_arrays(t, y, &net_type, v, av, &g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "array field w of net in grad has no data");
    /* ... or memory of another size */
    g.w = cr_array_vector(gw_short, NW - 1);
    assert_int_equal(cr_tape_gradient_struct_arrays(t, y, &net_type, v, av, &g), CR_ESHAPE);
    g.w = cr_array_vector(gw, NW);
    assert_int_equal(cr_tape_gradient_struct_arrays(t, y, &net_type, v, av, NULL), CR_EINVAL);
    assert_int_equal(cr_tape_gradient_struct_arrays(t, y, &net_type, v, NULL, &g), CR_EINVAL);
    assert_int_equal(cr_tape_gradient_struct_arrays(NULL, y, &net_type, v, av, &g), CR_EINVAL);
    cr_tangent tan;
    assert_int_equal(cr_tape_gradient_tangent_arrays(t, y, &net_type, v, NULL, f->arena, &tan),
                     CR_EINVAL);
    assert_int_equal(cr_tape_gradient_tangent_arrays(t, y, &net_type, v, av, NULL, &tan),
                     CR_EINVAL);
    /* After the refusals, the same call succeeds. */
    assert_int_equal(cr_tape_gradient_struct_arrays(t, y, &net_type, v, av, &g), CR_OK);
    assert_close(gw[0], fd_net(&c.m, 1, 0), FD_RTOL);
    cr_tape_free(t);
}

/* ---- Customised friendly gradients ---------------------------------------------------- */

/* A packed symmetric 2x2 matrix [a b; b c]. */
typedef struct sym2 {
    double a, b, c;
} sym2;

typedef struct pmodel {
    double s;
    int n;
    sym2 S;
} pmodel;

static const cr_field sym2_fields[] = {
    {"a", offsetof(sym2, a), CR_KIND_F64, NULL},
    {"b", offsetof(sym2, b), CR_KIND_F64, NULL},
    {"c", offsetof(sym2, c), CR_KIND_F64, NULL},
};
static const cr_type sym2_type = {"sym2", sizeof(sym2), 3, sym2_fields};
static const cr_field pmodel_fields[] = {
    {"s", offsetof(pmodel, s), CR_KIND_F64, NULL},
    {"n", offsetof(pmodel, n), CR_KIND_I32, NULL},
    {"S", offsetof(pmodel, S), CR_KIND_STRUCT, &sym2_type},
};
static const cr_type pmodel_type = {"pmodel", sizeof(pmodel), 3, pmodel_fields};

/* h(m) = s (u'Su) + sin(b) with u = (0.6, -1.1), in plain C */
static double h_c(const pmodel *m)
{
    double u = 0.6, v = -1.1;
    const sym2 *S = &m->S;
    return m->s * (S->a * u * u + 2 * S->b * u * v + S->c * v * v) + sin(S->b);
}

static cr_var h_t(cr_tape *t, const cr_var *x)
{
    cr_var s = cr_tape_struct_field(&pmodel_type, x, "s");
    cr_var a = cr_tape_struct_field(&pmodel_type, x, "S.a");
    cr_var b = cr_tape_struct_field(&pmodel_type, x, "S.b");
    cr_var c = cr_tape_struct_field(&pmodel_type, x, "S.c");
    double u = 0.6, v = -1.1;
    cr_var q =
        cr_add(t, cr_add(t, cr_mul(t, a, cr_const(u * u)), cr_mul(t, b, cr_const(2 * u * v))),
               cr_mul(t, c, cr_const(v * v)));
    return cr_add(t, cr_mul(t, s, q), cr_sin(t, b));
}

/* d h / d field (0 s, 1 a, 2 b, 3 c) by central differences. */
static double fd_pmodel(const pmodel *m, int which)
{
    double h = 1e-6, f[2];
    for (int k = 0; k < 2; k++) {
        pmodel p = *m;
        double *x = which == 0 ? &p.s : which == 1 ? &p.S.a : which == 2 ? &p.S.b : &p.S.c;
        *x += k == 0 ? -h : h;
        f[k] = h_c(&p);
    }
    return (f[1] - f[0]) / (2 * h);
}

/* The friendly gradient of the full symmetric matrix: each off-diagonal entry gets half of
 * the packed b's. Counts its calls in udata and checks the raw tangent it is given. */
static cr_status sym2_friendly(const cr_type *type, cr_tangent raw, void *dest, void *udata)
{
    int *calls = udata;
    (*calls)++;
    cr_tangent ta, tb, tc;
    if (type != &sym2_type || raw.tag != CR_TAN_STRUCT ||
        cr_tangent_getfield(raw, "a", &ta) != CR_OK ||
        cr_tangent_getfield(raw, "b", &tb) != CR_OK ||
        cr_tangent_getfield(raw, "c", &tc) != CR_OK || tb.tag != CR_TAN_F64)
        return CR_EINVAL;
    sym2 *d = dest;
    d->a = ta.u.f64;
    d->b = tb.u.f64 / 2;
    d->c = tc.u.f64;
    return CR_OK;
}

static cr_status sym2_refuse(const cr_type *type, cr_tangent raw, void *dest, void *udata)
{
    (void)type;
    (void)raw;
    (void)udata;
    ((sym2 *)dest)->a = 99; /* a partial write that must not reach grad */
    return CR_EDOMAIN;
}

static void test_friendly_customised(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    int calls = 0;
    assert_int_equal(cr_engine_friendly(eng, &sym2_type, sym2_friendly, &calls), CR_OK);
    cr_tape_params prm = {.struct_size = sizeof prm, .engine = eng};
    cr_tape *t, *plain;
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &plain), CR_OK);
    pmodel m = {.s = 1.7, .n = 4, .S = {.a = 0.9, .b = -0.4, .c = 2.2}};
    double want[4];
    for (int i = 0; i < 4; i++)
        want[i] = fd_pmodel(&m, i);

    /* Nested: S goes through the conversion, s is written as usual. */
    cr_var x[4];
    assert_int_equal(cr_tape_struct_inputs(t, &pmodel_type, &m, x, 4), CR_OK);
    cr_var y = h_t(t, x);
    pmodel g;
    memset(&g, 0x55, sizeof g);
    assert_int_equal(cr_tape_gradient_struct(t, y, &pmodel_type, x, &g), CR_OK);
    assert_int_equal(calls, 1);
    assert_close(g.s, want[0], FD_RTOL);
    assert_int_equal(g.n, 0);
    assert_close(g.S.a, want[1], FD_RTOL);
    assert_close(g.S.b, want[2] / 2, FD_RTOL);
    assert_close(g.S.c, want[3], FD_RTOL);

    /* A tape without the engine gives the raw gradient of each field. */
    assert_int_equal(cr_tape_struct_inputs(plain, &pmodel_type, &m, x, 4), CR_OK);
    y = h_t(plain, x);
    assert_int_equal(cr_tape_gradient_struct(plain, y, &pmodel_type, x, &g), CR_OK);
    assert_close(g.S.b, want[2], FD_RTOL);

    /* The struct itself of the customised type. */
    cr_tape_reset(t);
    cr_var xs[3];
    assert_int_equal(cr_tape_struct_inputs(t, &sym2_type, &m.S, xs, 3), CR_OK);
    cr_var ys = cr_mul(t, xs[1], xs[1]); /* b^2: d/db = 2b, friendly b */
    sym2 gs;
    assert_int_equal(cr_tape_gradient_struct(t, ys, &sym2_type, xs, &gs), CR_OK);
    assert_int_equal(calls, 2);
    assert_close(gs.b, m.S.b, 1e-15);
    assert_close(gs.a, 0.0, 0);

    /* A conversion that fails: its status, a message, and grad as it was. Registering again
     * replaces the conversion. */
    assert_int_equal(cr_engine_friendly(eng, &sym2_type, sym2_refuse, NULL), CR_OK);
    sym2 before = {1, 2, 3}, gr = before;
    assert_int_equal(cr_tape_gradient_struct(t, ys, &sym2_type, xs, &gr), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "friendly gradient of sym2 failed");
    assert_memory_equal(&gr, &before, sizeof gr);
    assert_int_equal(calls, 2);

    /* Bad registrations */
    assert_int_equal(cr_engine_friendly(NULL, &sym2_type, sym2_friendly, NULL), CR_EINVAL);
    assert_int_equal(cr_engine_friendly(eng, NULL, sym2_friendly, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "NULL type or function");
    assert_int_equal(cr_engine_friendly(eng, &sym2_type, NULL, NULL), CR_EINVAL);
    static const cr_field bad_fields[] = {{"s", 0, CR_KIND_STRUCT, NULL}};
    static const cr_type bad = {"bad", 8, 1, bad_fields};
    assert_int_equal(cr_engine_friendly(eng, &bad, sym2_friendly, NULL), CR_EINVAL);
    cr_tape_free(t);
    cr_tape_free(plain);
    cr_engine_free(eng);
}

/* With array fields: the raw tangent carries the gradient arrays, already filled. */
static cr_status layer_friendly(const cr_type *type, cr_tangent raw, void *dest, void *udata)
{
    (void)type;
    double *sum = udata;
    cr_tangent tb, tgain;
    if (cr_tangent_getfield(raw, "b", &tb) != CR_OK || tb.tag != CR_TAN_ARRAY ||
        cr_tangent_getfield(raw, "gain", &tgain) != CR_OK || tgain.tag != CR_TAN_F32)
        return CR_EINVAL;
    layer *d = dest;
    *sum = 0;
    for (size_t i = 0; i < NB; i++)
        *sum += (double)((const float *)tb.u.arr->data)[i];
    d->gain = 2 * tgain.u.f32; /* a visible change */
    return CR_OK;
}

static void test_friendly_customised_arrays(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    double bsum = 0;
    assert_int_equal(cr_engine_friendly(eng, &layer_type, layer_friendly, &bsum), CR_OK);
    cr_tape_params prm = {.struct_size = sizeof prm, .engine = eng};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    net_case c;
    net_setup(&c);
    cr_var v[2];
    cr_avar av[2];
    assert_int_equal(cr_tape_struct_inputs(t, &net_type, &c.m, v, 2), CR_OK);
    assert_int_equal(cr_tape_struct_array_inputs(t, &net_type, &c.m, av, 2), CR_OK);
    cr_var y = g_t(t, v, av, &c.m);
    double gw[NW];
    float gb[NB];
    size_t nb = NB;
    net g;
    memset(&g, 0, sizeof g);
    g.w = cr_array_vector(gw, NW);
    assert_int_equal(cr_array_view_init(&g.out.b, gb, CR_DT_F32, 1, &nb, NULL), CR_OK);
    assert_int_equal(cr_tape_gradient_struct_arrays(t, y, &net_type, v, av, &g), CR_OK);
    double want_sum = 0;
    for (size_t i = 0; i < NB; i++) {
        assert_close((double)gb[i], fd_net(&c.m, 2, i), 1e-6);
        want_sum += (double)gb[i];
    }
    assert_close(bsum, want_sum, 1e-12);
    assert_close((double)g.out.gain, 2 * fd_net(&c.m, 3, 0), 1e-6);
    assert_close(gw[1], fd_net(&c.m, 1, 1), FD_RTOL);
    assert_close(g.scale, fd_net(&c.m, 0, 0), FD_RTOL);
    cr_tape_free(t);
    cr_engine_free(eng);
}

static int run_tape_friendly(void)
{
    const struct CMUnitTest tape_friendly[] = {
        cmocka_unit_test_setup_teardown(test_friendly_gradient, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_friendly_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_friendly_arrays, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_friendly_array_errors, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_friendly_customised, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_friendly_customised_arrays, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tape_friendly, NULL, NULL);
}

/*
 * Friendly tangents and closures' fields, the paths the other friendly tests leave out:
 * function fields (left alone in the friendly gradient, ZeroTangent in the raw one), a
 * missing descriptor two levels down, a customised conversion of a nested struct that
 * fails, a nested array field of grad without data, a failed tape, NULL array variables,
 * no current tape, an engine with many customised types, a closure's f32 field read on a
 * tape, and closure tangents that frule_via_ad cannot use. Derivatives are checked against
 * central differences of plain-C versions of the same functions.
 */

#define FD_RTOL_friendly_edges 1e-8

/* Central difference of fn along one coordinate of x (n values). */
static double fd_at(double (*fn)(const double *), const double *x, size_t n, size_t j)
{
    double p[8], m[8], h = 1e-5;
    memcpy(p, x, n * sizeof *x);
    memcpy(m, x, n * sizeof *x);
    p[j] += h;
    m[j] -= h;
    return (fn(p) - fn(m)) / (2 * h);
}

/* ---- A struct with a function field -------------------------------------------------------- */

typedef struct withfn {
    double a;
    const cr_function *fn;
    double b;
} withfn;
static const cr_field withfn_fields[3] = {{"a", offsetof(withfn, a), CR_KIND_F64, NULL},
                                          {"fn", offsetof(withfn, fn), CR_KIND_FUNC, NULL},
                                          {"b", offsetof(withfn, b), CR_KIND_F64, NULL}};
static const cr_type withfn_type = {"withfn", sizeof(withfn), 3, withfn_fields};

/* h(a, b) = a sin(b) + b^2 */
static double h_c_friendly_edges(const double *x)
{
    return x[0] * sin(x[1]) + x[1] * x[1];
}

static cr_var h_t_friendly_edges(cr_tape *t, const cr_var *v)
{
    cr_var a = cr_tape_struct_field(&withfn_type, v, "a");
    cr_var b = cr_tape_struct_field(&withfn_type, v, "b");
    return cr_add(t, cr_mul(t, a, cr_sin(t, b)), cr_mul(t, b, b));
}

static void test_function_field(void **state)
{
    fixture *f = *state;
    withfn m = {0.8, cr_fn_sin.u.func.fn, -0.6};
    const double x[2] = {m.a, m.b};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var v[2];
    assert_int_equal(cr_tape_struct_inputs(t, &withfn_type, &m, v, 2), CR_OK);
    cr_var y = h_t_friendly_edges(t, v);
    assert_close(y.v, h_c_friendly_edges(x), 1e-15);
    /* The friendly gradient: real fields written, the function field left as it was. */
    withfn g = {0, cr_fn_cos.u.func.fn, 0};
    assert_ok(t, cr_tape_gradient_struct(t, y, &withfn_type, v, &g));
    assert_close(g.a, fd_at(h_c_friendly_edges, x, 2, 0), FD_RTOL_friendly_edges);
    assert_close(g.b, fd_at(h_c_friendly_edges, x, 2, 1), FD_RTOL_friendly_edges);
    assert_ptr_equal(g.fn, cr_fn_cos.u.func.fn);
    /* The raw tangent: ZeroTangent for the function field. */
    cr_tangent tan;
    assert_ok(t, cr_tape_gradient_tangent(t, y, &withfn_type, v, f->arena, &tan));
    assert_int_equal(tan.tag, CR_TAN_STRUCT);
    assert_int_equal(cr_tangent_field(tan, 1).tag, CR_TAN_ZERO);
    assert_close(cr_tangent_field(tan, 0).u.f64, g.a, 0);
    assert_close(cr_tangent_field(tan, 2).u.f64, g.b, 0);
    cr_tape_free(t);
}

/* ---- Descriptor errors, no current tape, a failed tape ------------------------------------ */

typedef struct mid {
    double s[1];
} mid;
static const cr_field mid_fields[1] = {{"s", 0, CR_KIND_STRUCT, NULL}};
static const cr_type mid_type = {"mid", sizeof(mid), 1, mid_fields};
typedef struct outer {
    double x;
    mid m;
} outer;
static const cr_field outer_fields[2] = {{"x", offsetof(outer, x), CR_KIND_F64, NULL},
                                         {"m", offsetof(outer, m), CR_KIND_STRUCT, &mid_type}};
static const cr_type outer_type = {"outer", sizeof(outer), 2, outer_fields};

static void test_input_errors(void **state)
{
    fixture *f = *state;
    outer o = {1.0, {{2.0}}};
    withfn m = {0.8, NULL, -0.6};
    cr_var v[4];
    cr_avar av[1];
    /* No tape given and none current. */
    assert_null(cr_tape_current());
    assert_int_equal(cr_tape_struct_inputs(NULL, &withfn_type, &m, v, 2), CR_EMISUSE);
    assert_int_equal(cr_tape_struct_array_inputs(NULL, &withfn_type, &m, av, 1), CR_EMISUSE);

    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    /* A struct field without descriptor two levels down is found, naming its type. */
    assert_int_equal(cr_tape_struct_inputs(t, &outer_type, &o, v, 4), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "mid: field 0 is a struct without a descriptor");
    assert_int_equal(cr_tape_status(t), CR_EINVAL);

    /* A failed tape: the struct gradients give its status and leave grad alone. */
    cr_var y = cr_const(1.0);
    withfn g = {5.0, NULL, 6.0};
    assert_int_equal(cr_tape_gradient_struct(t, y, &withfn_type, v, &g), CR_EINVAL);
    assert_true(g.a == 5.0 && g.b == 6.0);
    cr_tangent tan;
    assert_int_equal(cr_tape_gradient_tangent(t, y, &withfn_type, v, f->arena, &tan), CR_EINVAL);
    assert_int_equal(cr_tape_gradient_tangent(NULL, y, &withfn_type, v, f->arena, &tan), CR_EINVAL);

    /* After a reset the same work succeeds. */
    cr_tape_reset(t);
    const double x[2] = {m.a, m.b};
    assert_ok(t, cr_tape_struct_inputs(t, &withfn_type, &m, v, 2));
    y = h_t_friendly_edges(t, v);
    assert_ok(t, cr_tape_gradient_struct(t, y, &withfn_type, v, &g));
    assert_close(g.b, fd_at(h_c_friendly_edges, x, 2, 1), FD_RTOL_friendly_edges);
    cr_tape_free(t);
}

/* ---- Nested structs: customised conversions and array fields ------------------------------ */

typedef struct pair2 {
    double p, q;
} pair2;
static const cr_field pair2_fields[2] = {{"p", offsetof(pair2, p), CR_KIND_F64, NULL},
                                         {"q", offsetof(pair2, q), CR_KIND_F64, NULL}};
static const cr_type pair2_type = {"pair2", sizeof(pair2), 2, pair2_fields};
typedef struct holder {
    double s;
    pair2 P;
} holder;
static const cr_field holder_fields[2] = {{"s", offsetof(holder, s), CR_KIND_F64, NULL},
                                          {"P", offsetof(holder, P), CR_KIND_STRUCT, &pair2_type}};
static const cr_type holder_type = {"holder", sizeof(holder), 2, holder_fields};

/* k(s, p, q) = s p q + sin(p) */
static double k_c_friendly_edges(const double *x)
{
    return x[0] * x[1] * x[2] + sin(x[1]);
}

static cr_status pair2_refuse(const cr_type *type, cr_tangent raw, void *dest, void *udata)
{
    (void)type;
    (void)raw;
    (void)dest;
    (void)udata;
    return CR_EDOMAIN;
}

/* The friendly gradient of a pair2 is its raw gradient scaled by *udata. */
static cr_status pair2_scaled(const cr_type *type, cr_tangent raw, void *dest, void *udata)
{
    (void)type;
    const double *c = udata;
    pair2 *d = dest;
    d->p = *c * cr_tangent_field(raw, 0).u.f64;
    d->q = *c * cr_tangent_field(raw, 1).u.f64;
    return CR_OK;
}

/* Types that only fill the engine's table of customised conversions. */
typedef struct one {
    double v;
} one;
static const cr_field one_fields[1] = {{"v", 0, CR_KIND_F64, NULL}};
static const cr_type one_types[5] = {{"one0", sizeof(one), 1, one_fields},
                                     {"one1", sizeof(one), 1, one_fields},
                                     {"one2", sizeof(one), 1, one_fields},
                                     {"one3", sizeof(one), 1, one_fields},
                                     {"one4", sizeof(one), 1, one_fields}};

static void test_nested_customised(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    assert_int_equal(cr_engine_friendly(eng, &pair2_type, pair2_refuse, NULL), CR_OK);
    cr_tape *t;
    cr_tape_params prm = {.struct_size = sizeof prm, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    holder h = {1.5, {0.4, -0.9}};
    const double x[3] = {h.s, h.P.p, h.P.q};
    cr_var v[3];
    assert_ok(t, cr_tape_struct_inputs(t, &holder_type, &h, v, 3));
    cr_var y = cr_add(t, cr_mul(t, v[0], cr_mul(t, v[1], v[2])), cr_sin(t, v[1]));
    assert_close(y.v, k_c_friendly_edges(x), 1e-15);
    /* The nested struct's conversion fails: the whole gradient fails, grad as it was. */
    holder g = {7.0, {8.0, 9.0}};
    assert_int_equal(cr_tape_gradient_struct(t, y, &holder_type, v, &g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "the friendly gradient of pair2 failed");
    assert_true(g.s == 7.0 && g.P.p == 8.0 && g.P.q == 9.0);

    /* Registered again, after more types than the first table holds: the conversion
     * replaces the refusal and is still found. */
    double c = 2.0;
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(cr_engine_friendly(eng, &one_types[i], pair2_refuse, NULL), CR_OK);
    assert_int_equal(cr_engine_friendly(eng, &pair2_type, pair2_scaled, &c), CR_OK);
    assert_ok(t, cr_tape_gradient_struct(t, y, &holder_type, v, &g));
    assert_close(g.s, fd_at(k_c_friendly_edges, x, 3, 0), FD_RTOL_friendly_edges);
    assert_close(g.P.p, 2.0 * fd_at(k_c_friendly_edges, x, 3, 1), FD_RTOL_friendly_edges);
    assert_close(g.P.q, 2.0 * fd_at(k_c_friendly_edges, x, 3, 2), FD_RTOL_friendly_edges);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* A struct with many customised types registered before it: the first survives the growth
 * of the table. */
static void test_many_customised(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    double c = -3.0;
    assert_int_equal(cr_engine_friendly(eng, &pair2_type, pair2_scaled, &c), CR_OK);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(cr_engine_friendly(eng, &one_types[i], pair2_refuse, NULL), CR_OK);
    cr_tape *t;
    cr_tape_params prm = {.struct_size = sizeof prm, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    holder h = {0.3, {1.1, 0.2}};
    const double x[3] = {h.s, h.P.p, h.P.q};
    cr_var v[3];
    assert_ok(t, cr_tape_struct_inputs(t, &holder_type, &h, v, 3));
    cr_var y = cr_add(t, cr_mul(t, v[0], cr_mul(t, v[1], v[2])), cr_sin(t, v[1]));
    holder g;
    assert_ok(t, cr_tape_gradient_struct(t, y, &holder_type, v, &g));
    assert_close(g.P.q, -3.0 * fd_at(k_c_friendly_edges, x, 3, 2), FD_RTOL_friendly_edges);
    cr_tape_free(t);
    cr_engine_free(eng);
}

static const cr_function norule_fn = {.name = "norule", .arity = 1};

/* A nested array field: grad's lacks data; an array variable that is NULL; a failed tape. */
typedef struct lay {
    cr_array b;
    double gain;
} lay;
static const cr_field lay_fields[2] = {{"b", offsetof(lay, b), CR_KIND_ARRAY, NULL},
                                       {"gain", offsetof(lay, gain), CR_KIND_F64, NULL}};
static const cr_type lay_type = {"lay", sizeof(lay), 2, lay_fields};
typedef struct top {
    double s;
    lay L;
} top;
static const cr_field top_fields[2] = {{"s", offsetof(top, s), CR_KIND_F64, NULL},
                                       {"L", offsetof(top, L), CR_KIND_STRUCT, &lay_type}};
static const cr_type top_type = {"top", sizeof(top), 2, top_fields};

/* q(s, gain, b) = s gain + s sum(b) (b of 3 elements) */
static double q_c(const double *x)
{
    return x[0] * x[1] + x[0] * (x[2] + x[3] + x[4]);
}

/* r(s, gain, b) = s sum(b) (b of 3 elements) */
static double r_c(const double *x)
{
    return x[0] * (x[2] + x[3] + x[4]);
}

static void test_nested_arrays(void **state)
{
    fixture *f = *state;
    double b[3] = {0.5, -1.5, 2.25};
    top m = {1.2, {cr_array_vector(b, 3), 0.7}};
    const double x[5] = {m.s, m.L.gain, b[0], b[1], b[2]};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var v[2];
    cr_avar av[1];
    assert_ok(t, cr_tape_struct_inputs(t, &top_type, &m, v, 2));
    assert_ok(t, cr_tape_struct_array_inputs(t, &top_type, &m, av, 1));
    cr_var y = cr_add(t, cr_mul(t, v[0], v[1]), cr_mul(t, v[0], cr_av_sum(t, av[0])));
    assert_close(y.v, q_c(x), 1e-14);
    /* grad's nested array field describes no memory. */
    top g;
    memset(&g, 0, sizeof g);
    assert_int_equal(cr_tape_gradient_struct_arrays(t, y, &top_type, v, av, &g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "the array field b of lay in grad has no data");
    /* An array variable without array. */
    cr_avar none[1] = {cr_av_const(NULL)};
    cr_tangent tan;
    size_t used = cr_arena_used(f->arena);
    assert_int_equal(cr_tape_gradient_tangent_arrays(t, y, &top_type, v, none, f->arena, &tan),
                     CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "cr_tape_gradient_tangent_arrays: array variable 0 is NULL");
    assert_int_equal(cr_arena_used(f->arena), used);
    double gb[3];
    /* On a failed tape, its (sticky) status comes first, before grad's arrays are looked at. */
    cr_tape *bad;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &bad), CR_OK);
    cr_var vb[2];
    cr_avar avb[1];
    assert_ok(bad, cr_tape_struct_inputs(bad, &top_type, &m, vb, 2));
    assert_ok(bad, cr_tape_struct_array_inputs(bad, &top_type, &m, avb, 1));
    cr_value nr = cr_value_function(&norule_fn, NULL);
    cr_var yb = cr_tape_call1(bad, &nr, vb, 1);
    assert_int_equal(cr_tape_status(bad), CR_ENORULE);
    assert_int_equal(cr_tape_gradient_struct_arrays(bad, yb, &top_type, vb, avb, &g), CR_ENORULE);
    assert_int_equal(cr_tape_gradient_tangent_arrays(bad, yb, &top_type, vb, none, f->arena, &tan),
                     CR_ENORULE);
    assert_int_equal(cr_arena_used(f->arena), used);
    cr_tape_free(bad);
    /* With both fixed, the gradients. */
    g.L.b = cr_array_vector(gb, 3);
    assert_ok(t, cr_tape_gradient_struct_arrays(t, y, &top_type, v, av, &g));
    assert_close(g.s, fd_at(q_c, x, 5, 0), FD_RTOL_friendly_edges);
    assert_close(g.L.gain, fd_at(q_c, x, 5, 1), FD_RTOL_friendly_edges);
    for (size_t i = 0; i < 3; i++)
        assert_close(gb[i], fd_at(q_c, x, 5, 2 + i), FD_RTOL_friendly_edges);
    cr_tape_free(t);
}

/* The raw tangent with array variables of an earlier recording: refused with CR_ETAPE before
 * their arrays are read, since the struct and its arrays are borrowed only until the reset
 * and may be gone (here: the struct is released and its memory reused with another
 * shape). Found by test_tape_random_struct: the arrays were read first, to allocate the
 * tangent's, and a released struct gave "element count overflows" or a read of freed
 * memory. */
static void test_old_array_variables(void **state)
{
    fixture *f = *state;
    double b[3] = {0.5, -1.5, 2.25};
    top *m = malloc(sizeof *m);
    assert_non_null(m);
    *m = (top){1.2, {cr_array_vector(b, 3), 0.7}};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var v[2];
    cr_avar old[1];
    assert_ok(t, cr_tape_struct_inputs(t, &top_type, m, v, 2));
    assert_ok(t, cr_tape_struct_array_inputs(t, &top_type, m, old, 1));
    cr_tape_reset(t);
    /* the caller reuses the struct's memory: the old variable's array now reads as garbage */
    m->L.b.shape[0] = SIZE_MAX / 2;
    m->L.b.ndim = 2;
    m->L.b.shape[1] = 4;
    top m2 = {0.3, {cr_array_vector(b, 3), -0.4}};
    cr_avar av[1];
    assert_ok(t, cr_tape_struct_inputs(t, &top_type, &m2, v, 2));
    assert_ok(t, cr_tape_struct_array_inputs(t, &top_type, &m2, av, 1));
    cr_var y = cr_mul(t, v[0], cr_av_sum(t, av[0]));
    cr_tangent tan;
    size_t used = cr_arena_used(f->arena);
    assert_int_equal(cr_tape_gradient_tangent_arrays(t, y, &top_type, v, old, f->arena, &tan),
                     CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_gradient_tangent_arrays: array input 0 "
                                           "belongs to another tape, or to this tape before "
                                           "its last reset");
    assert_int_equal(cr_arena_used(f->arena), used);
    free(m);
    /* not the tape's failure: the same call with this recording's variables succeeds */
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_ok(t, cr_tape_gradient_tangent_arrays(t, y, &top_type, v, av, f->arena, &tan));
    cr_tangent tl, ts, tb;
    assert_int_equal(cr_tangent_getfield(tan, "s", &ts), CR_OK);
    assert_int_equal(cr_tangent_getfield(tan, "L", &tl), CR_OK);
    assert_int_equal(cr_tangent_getfield(tl, "b", &tb), CR_OK);
    const double x[5] = {m2.s, m2.L.gain, b[0], b[1], b[2]};
    assert_close(ts.u.f64, fd_at(r_c, x, 5, 0), FD_RTOL_friendly_edges);
    for (size_t i = 0; i < 3; i++)
        assert_close(((const double *)tb.u.arr->data)[i], fd_at(r_c, x, 5, 2 + i),
                     FD_RTOL_friendly_edges);
    cr_tape_free(t);
}

/* ---- Closures' fields ------------------------------------------------------------------- */

/* fc(x) = c x + in.d x^2 with c an f32 field and in.d a nested f64 field. */
typedef struct fin {
    double d;
} fin;
typedef struct fcl {
    float c;
    fin in;
} fcl;
static const cr_field fin_fields[1] = {{"d", offsetof(fin, d), CR_KIND_F64, NULL}};
static const cr_type fin_type = {"fin", sizeof(fin), 1, fin_fields};
static const cr_field fcl_fields[2] = {{"c", offsetof(fcl, c), CR_KIND_F32, NULL},
                                       {"in", offsetof(fcl, in), CR_KIND_STRUCT, &fin_type}};
static const cr_type fcl_type = {"fcl", sizeof(fcl), 2, fcl_fields};
static const cr_function fcl_fn = {.name = "fcl", .arity = 1, .self_type = &fcl_type};

/* x = (c, d, x) */
static double fcl_c(const double *x)
{
    return x[0] * x[2] + x[1] * x[2] * x[2];
}

static cr_status fcl_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_add(t, cr_mul(t, x[0], x[2]), cr_mul(t, x[1], cr_mul(t, x[2], x[2])));
    return cr_tape_status(t);
}

static cr_status refusing_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)out;
    (void)env;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "refusing_thunk: no value");
}

static const cr_notimpl k_ni = {__FILE__, __LINE__, "a missing tangent"};

static void test_closure_fields(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    assert_int_equal(cr_engine_overlay_closure(eng, &fcl_fn, fcl_ad, 1, NULL), CR_OK);
    fcl self = {0.3f, {-1.25}};
    const double x[3] = {(double)self.c, self.in.d, 0.9};
    cr_value fv = cr_value_function(&fcl_fn, &self);

    /* On a tape the fields are constants read from self, the f32 one included. */
    cr_tape *t;
    cr_tape_params prm = {.struct_size = sizeof prm, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    cr_var xv = cr_tape_input(t, x[2]);
    cr_var y = cr_tape_call1(t, &fv, &xv, 1);
    double g;
    assert_ok(t, cr_tape_gradient(t, y, &xv, 1, &g));
    assert_close(y.v, fcl_c(x), 1e-15);
    assert_close(g, fd_at(fcl_c, x, 3, 2), FD_RTOL_friendly_edges);
    cr_tape_free(t);

    /* frule_via_ad with closure tangents it cannot read. */
    const cr_config *cfg = cr_engine_config(eng);
    cr_value xa = cr_value_f64(x[2]), yv;
    cr_tangent dargs[2], dy, th;
    dargs[1] = cr_tangent_f64(1.0);
    assert_int_equal(cr_tangent_thunk(f->arena, refusing_thunk, NULL, "refusing", &th), CR_OK);
    dargs[0] = th;
    assert_int_equal(cr_frule_via_ad(cfg, f->arena, dargs, &fv, &xa, 1, &yv, &dy), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "refusing_thunk: no value");
    /* The nested struct's tangent is a number, not structural. */
    cr_tangent fields[2] = {cr_tangent_f32(1.0f), cr_tangent_f64(1.0)};
    assert_int_equal(cr_tangent_struct(f->arena, &fcl_type, NULL, fields, 2, &dargs[0]), CR_OK);
    assert_int_equal(cr_frule_via_ad(cfg, f->arena, dargs, &fv, &xa, 1, &yv, &dy), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(f->ctx), "the tangent of the closure fin must be structural");
    /* A real field's tangent is NotImplemented. */
    fields[0] = cr_tangent_notimpl(&k_ni);
    fields[1] = cr_tangent_zero();
    assert_int_equal(cr_tangent_struct(f->arena, &fcl_type, NULL, fields, 2, &dargs[0]), CR_OK);
    assert_int_equal(cr_frule_via_ad(cfg, f->arena, dargs, &fv, &xa, 1, &yv, &dy), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(f->ctx), "a missing tangent");

    /* A usable tangent: along (dc, dd, dx), against central differences. */
    const double dir[3] = {0.5, -2.0, 1.5};
    cr_tangent dd = cr_tangent_f64(dir[1]);
    cr_tangent inner_friendly_edges;
    assert_int_equal(cr_tangent_struct(f->arena, &fin_type, NULL, &dd, 1, &inner_friendly_edges),
                     CR_OK);
    fields[0] = cr_tangent_f32((float)dir[0]);
    fields[1] = inner_friendly_edges;
    assert_int_equal(cr_tangent_struct(f->arena, &fcl_type, NULL, fields, 2, &dargs[0]), CR_OK);
    dargs[1] = cr_tangent_f64(dir[2]);
    assert_int_equal(cr_frule_via_ad(cfg, f->arena, dargs, &fv, &xa, 1, &yv, &dy), CR_OK);
    double want = 0.0;
    for (size_t j = 0; j < 3; j++)
        want += dir[j] * fd_at(fcl_c, x, 3, j);
    assert_close(yv.u.f64, fcl_c(x), 1e-15);
    assert_int_equal(dy.tag, CR_TAN_F64);
    assert_close(dy.u.f64, want, FD_RTOL_friendly_edges);
    cr_engine_free(eng);
}

static int run_friendly_edges(void)
{
    const struct CMUnitTest friendly_edges[] = {
        cmocka_unit_test_setup_teardown(test_function_field, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_input_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nested_customised, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_many_customised, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nested_arrays, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_old_array_variables, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_closure_fields, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(friendly_edges, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_tape_friendly();
    failed += run_friendly_edges();
    return failed;
}
