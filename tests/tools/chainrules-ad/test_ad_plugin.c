/*
 * --rules: a call of plugin_cube, whose rule is a scalar row of a user's registry (the
 * check-plugin example), differentiated with that row: the gradient against central
 * differences of the same function.
 */
#include "test_util.h"

double plugin_cube(double x);
double p_plugin(const double *x, int n);
double p_plugin_rev(const double *x, double *x_b, int n, double p_plugin_b);

/* The primal of the example's row, for p_plugin itself and the differences. */
double plugin_cube(double x)
{
    return x * x * x;
}

static void test_plugin_row(void **state)
{
    (void)state;
    enum { N = 5 };
    const double x[N] = {0.3, -1.2, 0.8, 1.5, -0.4};
    double g[N] = {0};
    assert_close(p_plugin_rev(x, g, N, 1.0), p_plugin(x, N), 1e-15);
    for (int i = 0; i < N; i++) {
        double xp[N], xm[N], h = 1e-6;
        memcpy(xp, x, sizeof xp);
        memcpy(xm, x, sizeof xm);
        xp[i] += h;
        xm[i] -= h;
        ASSERT_CLOSE(g[i], (p_plugin(xp, N) - p_plugin(xm, N)) / (2 * h), 1e-7);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_plugin_row)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
