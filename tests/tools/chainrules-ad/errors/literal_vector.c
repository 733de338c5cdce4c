/* expect: literal_vector.c:12:12: error: unsupported construct in the vector forward mode of 'f': a struct literal passed by address to 'len2' \(pass its fields, or use the forward mode\) */
/* args: --vector f */
struct pt {
    double x, y;
};
static double len2(const struct pt *p)
{
    return p->x * p->x + p->y * p->y;
}
double f(const double *x)
{
    return len2(&(struct pt){x[0], x[1] * x[0]});
}
