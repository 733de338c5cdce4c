/*
 * Shared helpers of the unit tests: C11's CMPLX where the C library lacks it, exact
 * assertions that print both values, and the common fixture (a context and an arena).
 */
#ifndef CR_TEST_UTIL_H
#define CR_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

/* C11's CMPLX, which some C libraries do not define for every compiler (glibc and clang
 * before 12): the layout of a complex is two doubles, real part first. */
#ifndef CMPLX
static inline cr_complex cmplx_(double re, double im)
{
    double parts[2] = {re, im};
    cr_complex z;
    memcpy(&z, parts, sizeof z);
    return z;
}
#define CMPLX(x, y) cmplx_((double)(x), (double)(y))
#endif

#define ASSERT_DBL(got, want)                                                              \
    do {                                                                                   \
        double got_ = (got), want_ = (want);                                               \
        if (!(got_ == want_)) {                                                            \
            print_error("%s = %.17g, expected %.17g\n", #got, got_, want_);                \
            fail();                                                                        \
        }                                                                                  \
    } while (0)

#define ASSERT_CPLX(got, re, im)                                                           \
    do {                                                                                   \
        cr_complex gz_ = (got);                                                            \
        if (!(creal(gz_) == (re) && cimag(gz_) == (im))) {                                 \
            print_error("%s = %.17g%+.17gi, expected %.17g%+.17gi\n", #got, creal(gz_),    \
                        cimag(gz_), (double)(re), (double)(im));                           \
            fail();                                                                        \
        }                                                                                  \
    } while (0)

/* The common fixture: a context with the default allocator and a growable arena. A test
 * file with a fixture of its own defines CR_TEST_OWN_FIXTURE first. */
#ifndef CR_TEST_OWN_FIXTURE
typedef struct fixture {
    cr_ctx *ctx;
    cr_arena *arena;
} fixture;

static inline int fixture_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || cr_ctx_new(NULL, &f->ctx) != CR_OK ||
        cr_arena_new(f->ctx, NULL, &f->arena) != CR_OK)
        return -1;
    *state = f;
    return 0;
}

static inline int fixture_teardown(void **state)
{
    fixture *f = *state;
    cr_arena_free(f->arena);
    cr_ctx_free(f->ctx);
    free(f);
    return 0;
}

#endif /* CR_TEST_OWN_FIXTURE */

#endif /* CR_TEST_UTIL_H */
