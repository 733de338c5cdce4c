/**
 * @file check.h
 * @brief cr_check_main: the command-line rule checker behind `chainrules-check`, for a
 *        user's own registry.
 *
 * Declared here and defined in the separate library `chainrules_check` (not in
 * `chainrules`, which never prints). The installed `chainrules-check` program also loads
 * a user's registry from a shared object with `--plugin` (docs/testing-rules.md).
 */
#ifndef CR_CHECK_H
#define CR_CHECK_H

#include "common.h"
#include "rule.h"

CR_BEGIN_DECLS

/**
 * The `chainrules-check` program: run cr_test_rule_registration() over every entry of reg
 * (and, with --parents, of its parents), show a progress bar on stderr when it is a
 * terminal, print a summary (rules checked, passes, marginal, broken, failures with the
 * worst error and where) on stdout, and return the exit status: 0 when nothing failed,
 * 1 when a rule failed or could not be tested, 2 for a usage error. Options: --points N,
 * --seed S, --filter SUBSTRING, --rtol X, --atol X, --f64-only, --no-edges, --parents,
 * --verbose, --quiet, --no-progress, --list, --help.
 *
 * It lives in the small library `chainrules_check` (link `-lchainrules_check
 * -lchainrules`, or the CMake target `chainrules_check`), not in `chainrules`, because it
 * prints: it is a program's main, for a user's own checker, e.g.
 * @code
 * int main(int argc, char **argv)
 * {
 *     cr_registry *reg = my_rules();      // a registry over the built-ins
 *     int rc = cr_check_main(argc, argv, reg);
 *     cr_registry_free(reg);
 *     return rc;
 * }
 * @endcode
 * @param[in] argc as main's.
 * @param[in] argv as main's (argv[0] names the program in messages).
 * @param[in] reg  the registry whose rules are checked; NULL means the built-ins.
 * @return the process exit status.
 */
CR_API int cr_check_main(int argc, char **argv, const cr_registry *reg);

CR_END_DECLS

#endif /* CR_CHECK_H */
