/**
 * @file value.h
 * @brief Primal values and type descriptors for C structs and tuples.
 *
 * A `cr_value` is a small tagged union naming one primal argument or result: a real,
 * float or complex scalar, an integer or bool, an array, a C struct described by a
 * `cr_type`, or a function object. Type descriptors list a struct's fields (name, byte
 * offset, kind) so that structural tangents, projections and friendly gradients can walk
 * them; a tuple is a descriptor whose fields have NULL names.
 *
 * @code
 * typedef struct point { double x, y; int64_t id; } point;
 * static const cr_field point_fields[] = {
 *     {"x", offsetof(point, x), CR_KIND_F64, NULL},
 *     {"y", offsetof(point, y), CR_KIND_F64, NULL},
 *     {"id", offsetof(point, id), CR_KIND_I64, NULL},
 * };
 * static const cr_type point_type = {"point", sizeof(point), 3, point_fields};
 * point p = {1, 2, 7};
 * cr_value v = cr_value_struct(&point_type, &p);
 * @endcode
 */
#ifndef CR_VALUE_H
#define CR_VALUE_H

#include "array.h"
#include "common.h"

CR_BEGIN_DECLS

/** Kinds of primal values (and of struct fields). Append-only. */
typedef enum cr_kind {
    CR_KIND_NOTHING = 0, /**< No value (absent result). */
    CR_KIND_F64 = 1,     /**< double */
    CR_KIND_F32 = 2,     /**< float */
    CR_KIND_C128 = 3,    /**< double complex */
    CR_KIND_I64 = 4,     /**< int64_t; field kind reads an int64_t */
    CR_KIND_I32 = 5,     /**< int; field kind reads an int (value stored widened in i64) */
    CR_KIND_BOOL = 6,    /**< bool */
    CR_KIND_ARRAY = 7,   /**< cr_array (a field of this kind holds a cr_array by value) */
    CR_KIND_STRUCT = 8,  /**< C struct or tuple described by a cr_type */
    CR_KIND_FUNC = 9     /**< function object (see rule.h); a field of this kind holds a
                              `const cr_function *` */
} cr_kind;

struct cr_type;
struct cr_function;

/** One field of a described struct. */
typedef struct cr_field {
    const char *name;           /**< Field name; NULL for tuple elements. */
    size_t offset;              /**< Byte offset in the C struct (offsetof). */
    cr_kind kind;               /**< Field kind (I32 means a C `int`). */
    const struct cr_type *type; /**< Descriptor of a CR_KIND_STRUCT field; NULL otherwise. */
} cr_field;

/** A type descriptor for a C struct or tuple. Usually `static const`. */
typedef struct cr_type {
    const char *name;       /**< Type name, used in messages. */
    size_t size;            /**< sizeof the C struct. */
    size_t nfields;         /**< Number of fields. */
    const cr_field *fields; /**< The fields, in order. */
} cr_type;

/** A primal value. */
typedef struct cr_value {
    cr_kind kind; /**< Which member of u is valid. */
    union {
        double f64;            /**< CR_KIND_F64 */
        float f32;             /**< CR_KIND_F32 */
        cr_complex_field c128; /**< CR_KIND_C128 */
        int64_t i64;           /**< CR_KIND_I64, CR_KIND_I32 */
        bool b;                /**< CR_KIND_BOOL */
        cr_array *arr;         /**< CR_KIND_ARRAY: borrowed; rules never write through it. */
        struct {
            const cr_type *type; /**< Descriptor. */
            void *ptr;           /**< The C struct; borrowed, never written by rules. */
        } obj;                   /**< CR_KIND_STRUCT */
        struct {
            const struct cr_function *fn; /**< Identity, name, arity, primal. */
            void *self;                   /**< Functor fields (of fn->self_type), or NULL. */
        } func;                           /**< CR_KIND_FUNC */
    } u;                                  /**< Payload. */
} cr_value;

/** A double value. */
CR_API cr_value cr_value_f64(double x);
/** A float value. */
CR_API cr_value cr_value_f32(float x);
/** A complex value. */
CR_API cr_value cr_value_c128(cr_complex z);
/** An int64 value. */
CR_API cr_value cr_value_i64(int64_t i);
/** A bool value. */
CR_API cr_value cr_value_bool(bool b);
/** An array value (borrows arr). */
CR_API cr_value cr_value_array(cr_array *arr);
/** A struct value (borrows ptr, described by type). */
CR_API cr_value cr_value_struct(const cr_type *type, void *ptr);

/**
 * A function value: `fn` called with the fields `self` (a struct of fn->self_type, for
 * closures and functors) or NULL for a plain function. Both are borrowed.
 */
CR_API cr_value cr_value_function(const struct cr_function *fn, void *self);

/** Name of a kind ("f64", "array", ...). */
CR_API const char *cr_kind_name(cr_kind kind);

/**
 * Read field i of a described struct as a value (an ARRAY field gives a pointer into the
 * struct, a STRUCT field a pointer to the nested struct).
 * @return CR_OK; CR_EINVAL when i is out of range or the descriptor is inconsistent.
 */
CR_API cr_status cr_type_field_value(const cr_type *type, void *obj, size_t i, cr_value *out);

/** Index of the field called `name`, or -1. */
CR_API ptrdiff_t cr_type_field_index(const cr_type *type, const char *name);

CR_END_DECLS

#endif /* CR_VALUE_H */
