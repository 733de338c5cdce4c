/*
 * The families of contract.c (einsum of one or two arrays) and vect.c (a vector of
 * numbers), registered by src/rulesets/builtin.c.
 */
#ifndef CR_RULESETS_CONTRACT_H
#define CR_RULESETS_CONTRACT_H

#include "../../rules/rules_impl.h"

/* Register einsum's rules (one and two operands). */
CR_INTERNAL cr_status cr__family_contract(cr_registry *reg);

/* Register vect's rule (vect.c): Julia's Base.vect, a vector of numbers. */
CR_INTERNAL cr_status cr__family_vect(cr_registry *reg);

#endif /* CR_RULESETS_CONTRACT_H */
