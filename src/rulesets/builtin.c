/*
 * The built-in rule families, in registration order: the one list the built-in registry
 * (src/rules/registry.c) indexes through cr__builtin_families(). A new family is a
 * cr__family_* function in its ruleset file and one line here.
 */
#include "../rules/rules_impl.h"
#include "array/contract.h"

/* getfield, setfield! and construct (fields.c) */
CR_INTERNAL cr_status cr__family_fields(cr_registry *reg);
/* sparse_spmul (linalg/sparse_products.c) */
CR_INTERNAL cr_status cr__family_spmul(cr_registry *reg);
/* cexpint2 (scalar/expint_complex.c) */
CR_INTERNAL cr_status cr__family_cexpint(cr_registry *reg);

static const cr__family_fn k_families[] = {
    cr__family_basic,      cr__family_math,   cr__family_complex,  cr__family_special,
    cr__family_array,      cr__family_linalg, cr__family_contract, cr__family_vect,
    cr__family_structured, cr__family_fields, cr__family_spmul,    cr__family_cexpint,
};

cr_status cr__builtin_families(cr_registry *reg)
{
    cr_status first = CR_OK;
    for (size_t i = 0; i < sizeof k_families / sizeof k_families[0]; i++) {
        cr_status st = k_families[i](reg);
        if (st != CR_OK && first == CR_OK)
            first = st;
    }
    return first;
}
