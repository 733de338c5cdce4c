/* The programs of cforms_input.c and the derivatives chainrules-ad writes for them (the
 * modes of CMakeLists.txt, x of four elements for the Jacobian entries). */
#ifndef CR_TEST_CFORMS_INPUT_H
#define CR_TEST_CFORMS_INPUT_H

/* the declarations spell return types as the definitions do: the qualifiers are ignored */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-qualifiers"
const double c_ret(const double *x, int n);
extern const double c_ret2(const double *x, int n);
extern const double c_once(const double *x, int n);
#pragma GCC diagnostic pop

double c_lit_array(const double *x, int n);
double c_lit_struct(const double *x, int n);
double c_lit_member(const double *x, int n);
double c_post(const double *x, int n);
double c_down(const double *x, int n);
double c_iter(const double *x, int n);

double c_ret_rev(const double *x, double *x_b, int n, double c_ret_b);
double c_ret_fwd(const double *x, const double *x_d, int n, double *c_ret_d);
double c_ret_fwdv(const double *x, const double *x_d, int n, double *c_ret_d, int nd);
double c_ret_jacfwd(const double *x, int n, double *J);
double c_ret2_rev(const double *x, double *x_b, int n, double c_ret2_b);
double c_ret2_fwd(const double *x, const double *x_d, int n, double *c_ret2_d);
double c_ret2_fwdv(const double *x, const double *x_d, int n, double *c_ret2_d, int nd);
double c_ret2_jacfwd(const double *x, int n, double *J);
double c_lit_array_rev(const double *x, double *x_b, int n, double c_lit_array_b);
double c_lit_array_fwd(const double *x, const double *x_d, int n, double *c_lit_array_d);
double c_lit_array_fwdv(const double *x, const double *x_d, int n, double *c_lit_array_d, int nd);
double c_lit_array_jacfwd(const double *x, int n, double *J);
double c_lit_struct_rev(const double *x, double *x_b, int n, double c_lit_struct_b);
double c_lit_struct_fwd(const double *x, const double *x_d, int n, double *c_lit_struct_d);
double c_lit_struct_fwdv(const double *x, const double *x_d, int n, double *c_lit_struct_d, int nd);
double c_post_rev(const double *x, double *x_b, int n, double c_post_b);
double c_post_fwd(const double *x, const double *x_d, int n, double *c_post_d);
double c_post_fwdv(const double *x, const double *x_d, int n, double *c_post_d, int nd);
double c_post_jacfwd(const double *x, int n, double *J);
double c_down_rev(const double *x, double *x_b, int n, double c_down_b);
double c_down_fwd(const double *x, const double *x_d, int n, double *c_down_d);
double c_down_fwdv(const double *x, const double *x_d, int n, double *c_down_d, int nd);
double c_down_jacfwd(const double *x, int n, double *J);
double c_iter_rev(const double *x, double *x_b, int n, double c_iter_b);
double c_iter_fwd(const double *x, const double *x_d, int n, double *c_iter_d);
double c_iter_fwdv(const double *x, const double *x_d, int n, double *c_iter_d, int nd);
double c_iter_jacfwd(const double *x, int n, double *J);
double c_lit_member_rev(const double *x, double *x_b, int n, double c_lit_member_b);
double c_lit_member_fwd(const double *x, const double *x_d, int n, double *c_lit_member_d);
double c_lit_member_fwdv(const double *x, const double *x_d, int n, double *c_lit_member_d, int nd);
double c_lit_member_jacfwd(const double *x, int n, double *J);
double c_once_rev(const double *x, double *x_b, int n, double c_once_b);
double c_once_rev_set(const double *x, double *x_b, int n, double c_once_b);
double c_once_fwd(const double *x, const double *x_d, int n, double *c_once_d);
double c_once_jacfwd(const double *x, int n, double *J);

#endif
