/* expect: cond_docontinue.c:7:5: error: unsupported construct: `continue` in a do loop whose condition has a side effect */
/* The lowered condition is the end of the body, which `continue` would skip. */
double f(const double *x, int n)
{
    double s = 0;
    int i = 0;
    do {
        if (x[i] < 0)
            continue;
        s += x[i];
    } while (++i < n);
    return s;
}
