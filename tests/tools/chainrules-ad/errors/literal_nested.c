/* expect: literal_nested.c:5:12: error: unsupported construct: a compound literal of type 'double\[2\]\[2\]' \(only numbers, arrays of numbers, and structs of numbers and such arrays\) */
/* An array literal of arrays: only arrays of numbers, and structs of numbers and arrays. */
double f(const double *x)
{
    return (double[2][2]){{x[0], 1}, {2, x[1]}}[1][1];
}
