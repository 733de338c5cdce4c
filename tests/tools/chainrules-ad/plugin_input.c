/*
 * A call of a function that has no body here but a rule in a user's registry: the scalar
 * row plugin_cube of tools/check_plugin_example.c, given to chainrules-ad with --rules
 * (tests/tools/chainrules-ad/CMakeLists.txt). The generated code inlines that row's text.
 */
#include <math.h>

double plugin_cube(double x);
double p_plugin(const double *x, int n);

double p_plugin(const double *x, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += plugin_cube(x[i]) * sin(x[(i + 1) % n]);
    return s;
}
