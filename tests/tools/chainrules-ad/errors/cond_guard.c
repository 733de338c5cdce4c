/* expect: cond_guard.c:7:22: error: unsupported construct: an assignment or \+\+/-- in an operand of &&, \|\| or \?: of a loop condition \(test it in the loop's body\) */
/* A side effect that the condition may skip: not lowered. */
double f(const double *x, int n)
{
    double s = 0;
    int i = 0;
    while (s < 10 && i++ < n)
        s += x[i - 1];
    return s;
}
