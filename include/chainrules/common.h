/**
 * @file common.h
 * @brief Export macros, the complex type shim and basic definitions shared by every
 *        chainrules header.
 *
 * Every public header includes this one. It defines `CR_API` (symbol visibility for the
 * shared library), `CR_BEGIN_DECLS`/`CR_END_DECLS` (the `extern "C"` guard) and
 * `cr_complex`, which is `double _Complex` in C and `std::complex<double>` in C++ (the
 * two are layout- and ABI-compatible on every platform chainrules supports).
 */
#ifndef CR_COMMON_H
#define CR_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <complex>
/** Complex double as seen from C++ (layout-compatible with C's `double _Complex`). */
typedef std::complex<double> cr_complex;
/**
 * A complex member of a union (cr_value, cr_tangent) as seen from C++: the layout of
 * `std::complex<double>` (real part, then imaginary part), converting to and from it, but
 * trivially constructible, so that the unions, and the structs holding them, can be
 * declared without an initialiser (a `std::complex` member would delete their default
 * constructor). In C it is `cr_complex`.
 */
struct cr_complex_field {
    double re_im[2]; /**< Real and imaginary parts. */
    /** The value as a `std::complex<double>`. */
    operator cr_complex() const
    {
        return cr_complex(re_im[0], re_im[1]);
    }
    /** Store z. @param[in] z the value. @return this field. */
    cr_complex_field &operator=(const cr_complex &z)
    {
        re_im[0] = z.real();
        re_im[1] = z.imag();
        return *this;
    }
};
#if defined(__clang__)
/* Functions of the C API return cr_complex (std::complex<double> in C++), and clang warns
 * that it is not a C type; it has the layout of C's double _Complex and is returned the
 * same way on the platforms chainrules supports. (Not formatted: _Pragma takes one string
 * literal, which must not be split.) */
// clang-format off
#define CR__CXX_PUSH \
    _Pragma("clang diagnostic push") \
    _Pragma("clang diagnostic ignored \"-Wreturn-type-c-linkage\"")
// clang-format on
#define CR__CXX_POP _Pragma("clang diagnostic pop")
#else
#define CR__CXX_PUSH
#define CR__CXX_POP
#endif
#define CR_BEGIN_DECLS      \
    CR__CXX_PUSH extern "C" \
    {
#define CR_END_DECLS \
    }                \
    CR__CXX_POP
#else
#include <complex.h>
/** Complex double: C99 `double _Complex`. */
typedef double _Complex cr_complex;
/** A complex member of a union: `cr_complex` in C (a trivially constructible struct of the
 *  same layout in C++). */
typedef cr_complex cr_complex_field;
/** Opens the `extern "C"` block in C++; empty in C. */
#define CR_BEGIN_DECLS
/** Closes the `extern "C"` block in C++; empty in C. */
#define CR_END_DECLS
#endif

#if defined(CR_SHARED_BUILD) && defined(__GNUC__)
/** Marks a symbol of the public API (default visibility in the shared library). */
#define CR_API __attribute__((visibility("default")))
#else
#define CR_API
#endif

#if defined(__GNUC__)
/** Marks a deprecated declaration with a message naming its replacement. */
#define CR_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define CR_DEPRECATED(msg)
#endif

#endif /* CR_COMMON_H */
