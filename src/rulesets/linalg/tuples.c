/*
 * Tuple results and cotangents of the linear-algebra rules (linalg_impl.h): the types of the
 * tuples of two and three arrays that factorizations return, a tuple value from its arrays,
 * and the fields of a tuple cotangent as work matrices.
 */
#include <string.h>

#include "linalg_impl.h"

static const cr_field k_tup2_fields[2] = {{NULL, offsetof(cr__tup2, a), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(cr__tup2, b), CR_KIND_ARRAY, NULL}};
static const cr_field k_tup3_fields[3] = {{NULL, offsetof(cr__tup3, a), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(cr__tup3, b), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(cr__tup3, c), CR_KIND_ARRAY, NULL}};
const cr_type cr__k_tup2 = {"tuple(array,array)", sizeof(cr__tup2), 2, k_tup2_fields};
const cr_type cr__k_tup3 = {"tuple(array,array,array)", sizeof(cr__tup3), 3, k_tup3_fields};

cr_status cr__tuple_value(cr_arena *arena, size_t n, const cr_array *const *a, cr_value *y)
{
    const cr_type *ty = n == 2 ? &cr__k_tup2 : &cr__k_tup3;
    char *t = cr_arena_alloc(arena, ty->size, _Alignof(cr__tup3));
    if (t == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < n; i++)
        memcpy(t + ty->fields[i].offset, a[i], sizeof(cr_array));
    *y = cr_value_struct(ty, t);
    return CR_OK;
}

cr_status cr__tuple_cmats(cr_arena *arena, const char *who, cr_tangent dy, size_t n, size_t only,
                          const cr__field_spec *spec, cr__cmat *out, bool *zero)
{
    cr_status st = CR_OK;
    *zero = true;
    for (size_t i = 0; i < n; i++) {
        cr_tangent t = cr_tangent_zero();
        out[i].p = NULL;
        if (only == CR__TUPLE)
            st = cr__tuple_field(arena, who, dy, i, &t);
        else if (i == only)
            t = dy;
        if (st == CR_OK)
            st = cr__cmat_tan(arena, who, t, spec[i].ndim, spec[i].shape, spec[i].cplx, &out[i]);
        if (st != CR_OK)
            return st;
        *zero = *zero && out[i].p == NULL;
    }
    return CR_OK;
}
