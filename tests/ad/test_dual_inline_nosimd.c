/*
 * The tests of test_dual_inline.c on the portable form of CR_DUALN_DEFINE: the loops over
 * the directions on doubles (CR_DUALN_NO_SIMD, what compilers without GCC's vector
 * extensions get) instead of SIMD vector units.
 */
#define CR_DUALN_NO_SIMD 1
#include "test_dual_inline.c"

_Static_assert(!CR__DUALN_SIMD, "CR_DUALN_NO_SIMD selects the double unit");
/* the same size as with the SIMD units (tests/ad/test_dual_ba.c), so that translation units
 * compiled either way can share the types */
_Static_assert(sizeof(dual3) == 48 && sizeof(dual16) == 144, "layout of the double unit");
