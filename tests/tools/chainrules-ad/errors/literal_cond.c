/* expect: literal_cond.c:7:19: error: unsupported construct: a compound literal in a loop condition \(declare a local before the loop, or assign it in the body\) */
/* A compound literal is evaluated each time its loop's condition is: not lowered. */
double f(const double *x, int n)
{
    double s = 0;
    int i = 0;
    while (x[i] * (double[]){2, 3}[i % 2] < 10 && i < n)
        s += x[i++ % n];
    return s;
}
