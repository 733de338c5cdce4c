/* The install check's program for chainrules-ad: the generated energy_rev against central
 * differences. */
#include <math.h>
#include <stdio.h>

double energy(const double *x, int n);
double energy_rev(const double *x, double *x_b, int n, double energy_b);

int main(void)
{
    double x[5] = {0.3, -1.1, 0.7, 2.0, -0.4}, g[5] = {0};
    energy_rev(x, g, 5, 1.0);
    for (int i = 0; i < 5; i++) {
        double xp[5], xm[5], h = 1e-6;
        for (int k = 0; k < 5; k++)
            xp[k] = xm[k] = x[k];
        xp[i] += h;
        xm[i] -= h;
        double fd = (energy(xp, 5) - energy(xm, 5)) / (2 * h);
        if (!(fabs(g[i] - fd) < 1e-6)) {
            printf("energy_rev: d/dx%d = %g, central differences %g\n", i, g[i], fd);
            return 1;
        }
    }
    printf("chainrules-ad consumer OK\n");
    return 0;
}
