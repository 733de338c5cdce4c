/*
 * The former names of the array-variable operations (include/chainrules/deprecated.h):
 * each calls its cr_av_ replacement.
 */
#include "chainrules/deprecated.h"

#include "chainrules/kernel.h"
#include "chainrules/tape.h"

cr_avar cr_aconst(const cr_array *a)
{
    return cr_av_const(a);
}

cr_avar cr_abroadcast1(cr_tape *t, const cr_value *f, cr_targ x)
{
    return cr_av_broadcast1(t, f, x);
}

cr_avar cr_abroadcast2(cr_tape *t, const cr_value *f, cr_targ x, cr_targ y)
{
    return cr_av_broadcast2(t, f, x, y);
}

cr_var cr_asum(cr_tape *t, cr_avar x)
{
    return cr_av_sum(t, x);
}

cr_var cr_adot(cr_tape *t, cr_avar x, cr_avar y)
{
    return cr_av_dot(t, x, y);
}

cr_avar cr_aslice(cr_tape *t, cr_avar x, int64_t start, int64_t stop)
{
    return cr_av_slice(t, x, start, stop);
}

cr_avar cr_amatmul(cr_tape *t, cr_avar A, cr_avar B)
{
    return cr_av_matmul(t, A, B);
}

cr_avar cr_akernel(cr_tape *t, const cr_kernel *k, const cr_kin *args, size_t nargs, size_t n)
{
    return cr_av_kernel(t, k, args, nargs, n);
}

cr_var cr_akernel_sum(cr_tape *t, const cr_kernel *k, const cr_kin *args, size_t nargs, size_t n)
{
    return cr_av_kernel_sum(t, k, args, nargs, n);
}
