/**
 * @file chainrules.h
 * @brief Umbrella header: includes every chainrules module except the opt-in ones.
 *
 * Opt-in headers, included by name where they are used: chainrules/kernel.h (the fused
 * kernel macro language, CR_KERNEL and the cr_k_* operations), chainrules/tape_inline.h (the
 * tape's arithmetic and recording cursors inline in the caller, and the record format they
 * write) and chainrules/mpi.h (chainrules-mpi, which needs <mpi.h>).
 *
 * chainrules is the ChainRules differentiation system in C11: tangent types and their
 * algebra, projection, rules (frule / rrule with pullbacks), rule testing with finite
 * differences, and AD engines over the rules.
 *
 * Thread-safety contract:
 * - There is no mutable global state except the built-in rule tables, indexed once.
 * - A cr_ctx, the arenas made from it and everything allocated in them are
 *   thread-confined: one thread at a time.
 * - Type descriptors and function objects are immutable after creation and may be shared.
 */
#ifndef CR_CHAINRULES_H
#define CR_CHAINRULES_H

#include "chainrules/adcall.h"
#include "chainrules/adstack.h"
#include "chainrules/arena.h"
#include "chainrules/arith_rows.h"
#include "chainrules/array.h"
#include "chainrules/check.h"
#include "chainrules/common.h"
#include "chainrules/ctx.h"
#include "chainrules/deprecated.h"
#include "chainrules/dual.h"
#include "chainrules/dual_inline.h"
#include "chainrules/dual_inline_rows.h"
#include "chainrules/engine.h"
#include "chainrules/fd.h"
#include "chainrules/project.h"
#include "chainrules/revolve.h"
#include "chainrules/rule.h"
#include "chainrules/rules_array.h"
#include "chainrules/rules_complex.h"
#include "chainrules/rules_linalg.h"
#include "chainrules/rules_math.h"
#include "chainrules/rules_sparse.h"
#include "chainrules/rules_special.h"
#include "chainrules/rules_structured.h"
#include "chainrules/scalar_rule.h"
#include "chainrules/status.h"
#include "chainrules/tangent.h"
#include "chainrules/tape.h"
#include "chainrules/tape_array.h"
#include "chainrules/tape_ops.h"
#include "chainrules/tape_prepared.h"
#include "chainrules/tape_struct.h"
#include "chainrules/testing.h"
#include "chainrules/value.h"
#include "chainrules/version.h"

/* The cmocka assertion for rule tests needs cmocka: opt in. */
#if defined(CR_WITH_CMOCKA)
#include "chainrules/testing_cmocka.h"
#endif

#endif /* CR_CHAINRULES_H */
