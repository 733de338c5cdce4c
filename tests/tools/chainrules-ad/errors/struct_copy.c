/* expect: struct_copy.c:8:15: error: unsupported construct: a struct holding real data assigned as a whole, other than a local copied from a local \(assign its fields\) */
/* A struct copied from a pointer's target: only a local from a local is split by field. */
struct pt {
    double x, y;
};
double f(const struct pt *p)
{
    struct pt q = *p;
    return q.x * q.y;
}
