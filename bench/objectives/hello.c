/*
 * GradBench's hello eval (evals/hello/README.md): "square" is x^2, "double" its derivative,
 * which the tool obtains by differentiating hello_square().
 */
#include "objectives.h"

double hello_square(double x)
{
    return x * x;
}
