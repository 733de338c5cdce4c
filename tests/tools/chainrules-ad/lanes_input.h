/* Programs of lanes_input.c and their generated derivatives (test_ad_lanes.c). */
#ifndef CR_TEST_LANES_INPUT_H
#define CR_TEST_LANES_INPUT_H

#include <stddef.h>

enum { L_N = 6, L_M = 4 };

void l_gather(const int *idx, const double *x, double *y);
void l_blocks(const int *idx, const double *x, double *y);
void l_cond(const int *idx, const double *x, double *y);
void l_call(const int *idx, const double *x, double *y);
void l_scalar(const int *idx, const double *x, double s, double *y);
void l_lazy(const int *idx, const double *x, double *y);
void l_struct(const int *idx, const double *x, double *y);
void l_rows(const int *idx, const double *x, double *y);

#define L_DECL(name)                                                                             \
    void name##_fwd(const int *idx, const double *x, const double *x_d, double *y, double *y_d); \
    void name##_fwdv(const int *idx, const double *x, const double *x_d, double *y, double *y_d, \
                     int nd);
L_DECL(l_gather)
L_DECL(l_blocks)
L_DECL(l_cond)
L_DECL(l_call)
L_DECL(l_lazy)
L_DECL(l_struct)
L_DECL(l_rows)
#undef L_DECL
void l_scalar_fwd(const int *idx, const double *x, const double *x_d, double s, double s_d,
                  double *y, double *y_d);
void l_scalar_fwdv(const int *idx, const double *x, const double *x_d, double s, const double *s_d,
                   double *y, double *y_d, int nd);

#endif
