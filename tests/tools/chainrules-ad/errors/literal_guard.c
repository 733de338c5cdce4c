/* expect: literal_guard.c:5:27: error: unsupported construct: a compound literal in an operand of \?:, && or \|\| \(declare a local before the statement\) */
/* A compound literal that may not be evaluated (its initialisers could fail): not hoisted. */
double f(const double *x, int n)
{
    return n > 1 ? x[0] * (double[]){x[1], 2}[0] : x[0];
}
