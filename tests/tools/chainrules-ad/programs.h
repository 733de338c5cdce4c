/* The functions of tests/tools/chainrules-ad/programs.c and the derivatives chainrules-ad writes
 * for them. */
#ifndef CR_TEST_AD_PROGRAMS_H
#define CR_TEST_AD_PROGRAMS_H

struct p_model {
    int id;
    double bias;
    double w[3];
    double scale;
};

#define P_ARRAY_FN(name)                                                            \
    double name(const double *x, int n);                                            \
    double name##_rev(const double *x, double *x_b, int n, double name##_b);        \
    double name##_fwd(const double *x, const double *x_d, int n, double *name##_d); \
    double name##_fwdv(const double *x, const double *x_d, int n, double *name##_d, int nd);

#define P_ARRAY_FNS(X)   \
    X(p_rosen)           \
    X(p_break)           \
    X(p_return)          \
    X(p_while)           \
    X(p_calls)           \
    X(p_ternary)         \
    X(p_nested)          \
    X(p_switch)          \
    X(p_recursion)       \
    X(p_local_array)     \
    X(p_index_local)     \
    X(p_callee_locals)   \
    X(p_inline_helper)   \
    X(p_ternary_calls)   \
    X(p_bounds)          \
    X(p_stored_partials) \
    X(p_whole_array)     \
    X(p_part_array)      \
    X(p_whole_break)     \
    X(p_fused_tail)      \
    X(p_unfused_tail)    \
    X(p_macro_for)       \
    X(p_macro_stmts)     \
    X(p_loop_inits)      \
    X(p_set_square)      \
    X(p_set_mirror)      \
    X(p_set_stride)      \
    X(p_set_consts)      \
    X(p_struct_local)    \
    X(p_struct_nested)   \
    X(p_struct_calls)

P_ARRAY_FNS(P_ARRAY_FN)

/* The functions above whose gradient --reverse-set can assign (f_rev_set); the others are
 * refused with the documented message (check_reverse_set.cmake). */
#define P_SET_FNS(X) \
    X(p_nested)      \
    X(p_set_square)  \
    X(p_set_mirror)  \
    X(p_set_stride)  \
    X(p_set_consts)
#define P_SET_FN(name) double name##_rev_set(const double *x, double *x_b, int n, double name##_b);
P_SET_FNS(P_SET_FN)

/* The Jacobian entries (--jacobian, --dims x=6) of the functions above. J is 1 x 6. */
#define P_JAC_FNS(X)     \
    X(p_rosen)           \
    X(p_calls)           \
    X(p_recursion)       \
    X(p_callee_locals)   \
    X(p_ternary_calls)   \
    X(p_break)           \
    X(p_return)          \
    X(p_while)           \
    X(p_ternary)         \
    X(p_nested)          \
    X(p_switch)          \
    X(p_local_array)     \
    X(p_index_local)     \
    X(p_inline_helper)   \
    X(p_bounds)          \
    X(p_stored_partials) \
    X(p_whole_array)     \
    X(p_part_array)      \
    X(p_whole_break)     \
    X(p_fused_tail)      \
    X(p_unfused_tail)    \
    X(p_macro_for)       \
    X(p_macro_stmts)     \
    X(p_loop_inits)      \
    X(p_set_square)      \
    X(p_set_mirror)      \
    X(p_set_stride)      \
    X(p_set_consts)      \
    X(p_struct_local)    \
    X(p_struct_nested)
#define P_JAC_FN(name) double name##_jacfwd(const double *x, int n, double *J);
P_JAC_FNS(P_JAC_FN)
/* J 1 x 2 (a, b); 5 x 6 (y by x, scale; --dims p_outputs.x=5,y=5); 4 x 5 (u on exit by u on
 * entry, h; --dims u=4); 1 x 6 (float); 3 x 4 (u on exit, then the return value, by p and u on
 * entry; --dims p=2,p_timeloop.u=2). */
double p_scalar_jacfwd(double a, double b, int k, double *J);
void p_outputs_jacfwd(const double *x, double scale, double *y, int n, double *J);
void p_inplace_jacfwd(double *u, int n, double h, double *J);
float p_float_jacfwd(const float *x, int n, double *J);
double p_timeloop_jacfwd(const double *p, double *u, long steps, double *J);
/* 20 inputs: the Jacobian entry calls wide_step once per block of 16 lanes. */
double p_wide(const double *x, int n);
double p_wide_rev(const double *x, double *x_b, int n, double p_wide_b);
double p_wide_jacfwd(const double *x, int n, double *J);

double p_scalar(double a, double b, int k);
double p_scalar_rev(double a, double *a_b, double b, double *b_b, int k, double p_scalar_b);
double p_scalar_fwd(double a, double a_d, double b, double b_d, int k, double *p_scalar_d);

void p_outputs(const double *x, double scale, double *y, int n);
void p_outputs_rev(const double *x, double *x_b, double scale, double *scale_b, double *y,
                   double *y_b, int n);
void p_outputs_fwd(const double *x, const double *x_d, double scale, double scale_d, double *y,
                   double *y_d, int n);
void p_outputs_fwdv(const double *x, const double *x_d, double scale, const double *scale_d,
                    double *y, double *y_d, int n, int nd);

void p_inplace(double *u, int n, double h);
void p_inplace_rev(double *u, double *u_b, int n, double h, double *h_b);
void p_inplace_fwd(double *u, double *u_d, int n, double h, double h_d);

double p_struct(const struct p_model *m, const double *x, int n);
double p_struct_rev(const struct p_model *m, struct p_model *m_b, const double *x, double *x_b,
                    int n, double p_struct_b);
double p_struct_fwd(const struct p_model *m, const struct p_model *m_d, const double *x,
                    const double *x_d, int n, double *p_struct_d);
/* m_d[k]: the tangents of m's fields in direction k (one struct per direction) */
double p_struct_fwdv(const struct p_model *m, const struct p_model *m_d, const double *x,
                     const double *x_d, int n, double *p_struct_d, int nd);

float p_float(const float *x, int n);
float p_float_rev(const float *x, float *x_b, int n, float p_float_b);
float p_float_fwd(const float *x, const float *x_d, int n, float *p_float_d);

double p_timeloop(const double *p, double *u, long steps);
double p_timeloop_rev(const double *p, double *p_b, double *u, double *u_b, long steps,
                      double p_timeloop_b);

double p_timeloop_ck(const double *p, double *u, long steps);
double p_timeloop_ck_rev(const double *p, double *p_b, double *u, double *u_b, long steps,
                         double p_timeloop_ck_b);

#endif
