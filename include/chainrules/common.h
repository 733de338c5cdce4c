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
#define CR_BEGIN_DECLS extern "C" {
#define CR_END_DECLS }
#else
#include <complex.h>
/** Complex double: C99 `double _Complex`. */
typedef double _Complex cr_complex;
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
