/*
 * The linear-algebra functions with rules (the built-in ones of rules_linalg.h; those that
 * need LAPACKE only when it is there), for the tests that go through all of them.
 */
#ifndef TEST_LINALG_FNS_H
#define TEST_LINALG_FNS_H

#include <chainrules.h>

static const cr_value *const k_fns[] = {
    &cr_fn_dot,
    &cr_fn_matmul,
    &cr_fn_gemm,
    &cr_fn_tr,
    &cr_fn_kron,
    &cr_fn_cross,
    &cr_fn_asum,
    &cr_fn_symmetric,
    &cr_fn_hermitian,
    &cr_fn_diagonal,
    &cr_fn_nrm2,
    &cr_fn_gemv,
#if defined(CR_HAVE_LAPACKE)
    &cr_fn_det,
    &cr_fn_logdet,
    &cr_fn_logabsdet,
    &cr_fn_matinv,
    &cr_fn_solve,
    &cr_fn_rdiv,
    &cr_fn_cholesky,
    &cr_fn_eigen,
    &cr_fn_eigvals,
    &cr_fn_svd,
    &cr_fn_expm,
    &cr_fn_matfun_herm,
    &cr_fn_svdvals,
    &cr_fn_lu,
    &cr_fn_qr,
    &cr_fn_eigen_general,
    &cr_fn_eigvals_general,
    &cr_fn_cholesky_solve,
    &cr_fn_cholesky_det,
    &cr_fn_cholesky_logdet,
    &cr_fn_pinv,
    &cr_fn_sylvester,
    &cr_fn_lyap,
    &cr_fn_getrf,
    &cr_fn_getrs,
    &cr_fn_getri,
    &cr_fn_potrf,
    &cr_fn_potrs,
    &cr_fn_trtrs,
    &cr_fn_trsyl,
#endif
};
#define NFNS (sizeof k_fns / sizeof k_fns[0])

#endif /* TEST_LINALG_FNS_H */
