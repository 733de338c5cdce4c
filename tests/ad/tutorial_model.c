/* The tutorial's loss as a file of its own, for its step 9 (docs/tutorial.md): plain C that
 * chainrules-ad differentiates at build time (tests/CMakeLists.txt). */
#include <math.h>

double loss_model(const double *p);

static double softclip_c(double u)
{
    return u / sqrt(1.0 + u * u);
}

static const double T[4] = {-1.0, 0.0, 0.5, 2.0}; /* inputs  */
static const double Z[4] = {-0.5, 0.1, 0.3, 0.8}; /* targets */

double loss_model(const double *p)
{
    double s = 0.0;
    for (int i = 0; i < 4; i++) {
        double e = softclip_c(p[0] * T[i] + p[1]) - Z[i];
        s += e * e;
    }
    return s;
}
