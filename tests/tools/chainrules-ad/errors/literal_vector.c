/* expect: literal_vector.c:9:12: error: unsupported construct in the vector forward mode of 'f': a compound literal of type 'struct pt' holding active values */
/* args: --vector f */
struct pt {
    double x, y;
};

double f(const double *x)
{
    return (struct pt){x[0], x[1] * x[0]}.y;
}
