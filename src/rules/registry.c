/*
 * The rule registry: entries keyed by function (a hash on the function's address, chains
 * per function), dispatch on argument kinds (most specific match wins, config-specific
 * rules before config-free ones), ambiguity rejected at registration, opt-outs.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "rules_impl.h"

#define MASK_ALL 0x1FFFu

/* ---- Matchers -------------------------------------------------------------------------- */

cr_argspec cr_argspec_of(const cr_value *v)
{
    cr_argspec m = {0, NULL};
    switch (v->kind) {
    case CR_KIND_F64:
        m.mask = CR_M_F64;
        break;
    case CR_KIND_F32:
        m.mask = CR_M_F32;
        break;
    case CR_KIND_C128:
        m.mask = CR_M_C128;
        break;
    case CR_KIND_I64:
    case CR_KIND_I32:
        m.mask = CR_M_INT;
        break;
    case CR_KIND_BOOL:
        m.mask = CR_M_BOOL;
        break;
    case CR_KIND_ARRAY:
        if (v->u.arr == NULL)
            break;
        switch ((cr_dtype)v->u.arr->dtype) {
        case CR_DT_F64:
            m.mask = CR_M_A_F64;
            break;
        case CR_DT_F32:
            m.mask = CR_M_A_F32;
            break;
        case CR_DT_C128:
            m.mask = CR_M_A_C128;
            break;
        case CR_DT_I64:
            m.mask = CR_M_A_INT;
            break;
        case CR_DT_BOOL:
            m.mask = CR_M_A_BOOL;
            break;
        }
        break;
    case CR_KIND_STRUCT:
        m.mask = CR_M_STRUCT;
        m.type = v->u.obj.type;
        break;
    case CR_KIND_FUNC:
        m.mask = CR_M_FUNC;
        break;
    case CR_KIND_NOTHING:
        m.mask = CR_M_NOTHING;
        break;
    }
    return m;
}

static bool spec_subset(cr_argspec a, cr_argspec b)
{
    if ((a.mask & ~b.mask) != 0)
        return false;
    if ((a.mask & CR_M_STRUCT) && b.type != NULL && a.type != b.type)
        return false;
    return true;
}

static bool spec_equal(cr_argspec a, cr_argspec b)
{
    return a.mask == b.mask && (!(a.mask & CR_M_STRUCT) || a.type == b.type);
}

/* Intersection; false when empty. */
static bool spec_meet(cr_argspec a, cr_argspec b, cr_argspec *out)
{
    out->mask = a.mask & b.mask;
    out->type = NULL;
    if (out->mask & CR_M_STRUCT) {
        if (a.type != NULL && b.type != NULL && a.type != b.type)
            out->mask &= ~(uint32_t)CR_M_STRUCT;
        else
            out->type = a.type != NULL ? a.type : b.type;
    }
    return out->mask != 0;
}

static bool value_matches(const cr_value *v, cr_argspec m)
{
    cr_argspec a = cr_argspec_of(v);
    return a.mask != 0 && spec_subset(a, m);
}

/* The matcher of entry e at position i of an n-argument call (false: arity mismatch). */
static bool spec_at(const cr_rule_def *d, size_t i, size_t n, cr_argspec *out)
{
    if (d->variadic) {
        if (d->nargs == 0 || n + 1 < d->nargs)
            return false;
        *out = d->args[i < d->nargs ? i : d->nargs - 1];
        return true;
    }
    if (n != d->nargs)
        return false;
    *out = d->args[i];
    return true;
}

static bool arity_ok(const cr_rule_def *d, size_t n)
{
    return d->variadic ? (d->nargs >= 1 && n + 1 >= d->nargs) : n == d->nargs;
}

static bool sig_matches(const cr_rule_def *d, const cr_value *args, size_t n)
{
    if (!arity_ok(d, n))
        return false;
    for (size_t i = 0; i < n; i++) {
        cr_argspec m = {0, NULL};
        if (!spec_at(d, i, n, &m) || !value_matches(&args[i], m))
            return false;
    }
    return true;
}

/* a's signature is a subset of b's at arity n. */
static bool sig_subset(const cr_rule_def *a, const cr_rule_def *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cr_argspec x, y;
        if (!spec_at(a, i, n, &x) || !spec_at(b, i, n, &y) || !spec_subset(x, y))
            return false;
    }
    return true;
}

/* Whether a is at least as specific as b for an n-argument call. */
static bool at_least_as_specific(const cr_rule_def *a, const cr_rule_def *b, size_t n)
{
    if (!sig_subset(a, b, n))
        return false;
    if ((a->caps & b->caps) != b->caps)
        return false;
    if (a->variadic && b->variadic && a->nargs < b->nargs)
        return false; /* a accepts shorter calls than b: (f64...) is less specific than
                         (f64, f64...), although they agree at every common arity */
    if (a->variadic && !b->variadic && sig_subset(b, a, n) && a->caps == b->caps)
        return false; /* equal signatures: the fixed-arity one is more specific */
    return true;
}

static uint32_t modes_of(const cr__entry *e)
{
    uint32_t m = 0;
    if (e->def.frule != NULL || (e->flags & E_NO_FRULE))
        m |= CR_MODE_FRULE;
    if (e->def.rrule != NULL || (e->flags & E_NO_RRULE))
        m |= CR_MODE_RRULE;
    return m;
}

/* ---- The lookup memo ------------------------------------------------------------------- */

/*
 * A lookup's answer depends only on the registry (its entries and its parents'), the
 * function, the mode, the config's capabilities and each argument's matcher atom (the
 * cr_argspec_of of the value). Each thread keeps recent answers in a small direct-mapped
 * table, so that the engines, which look up the same few rules over and over, do not rank
 * candidates at every call. A slot holds the generation it was filled in; every change to
 * any registry (an entry added, a registry freed, whose address a new one may take)
 * advances the one global generation, which turns every older slot into a miss. A registry
 * is confined to one thread while it is filled and read-only once frozen, so no thread
 * can read a slot made stale by a change that did not advance the generation. Calls with a
 * struct argument (matched by type) or more than MEMO_MAX_ARGS arguments are not kept.
 */
#define MEMO_SLOTS    64 /* a power of two */
#define MEMO_MAX_ARGS 13 /* 4 bits each in a slot's key, then nargs and the mode */

typedef struct memo_slot {
    uint64_t gen; /* 0: never filled */
    const cr_registry *reg;
    const cr_function *fn;
    uint64_t key; /* 4 bits per argument (its atom's bit index + 1, 0: no kind), then the
                     number of arguments (bits 52-55) and the mode (56-57) */
    uint32_t caps;
    bool opted_out;
    cr_status st;
    const cr_rule_def *def;
} memo_slot;

static _Atomic uint64_t k_memo_gen = 1;
static _Thread_local memo_slot k_memo[MEMO_SLOTS];

static void memo_invalidate(void)
{
    atomic_fetch_add_explicit(&k_memo_gen, 1, memory_order_release);
}

/* The bit index + 1 of a matcher atom (a single bit), 0 for no kind. */
static unsigned atom_index(uint32_t m)
{
    if (m == 0)
        return 0;
#if defined(__GNUC__)
    return (unsigned)__builtin_ctz(m) + 1;
#else
    unsigned k = 1;
    for (; !(m & 1u); m >>= 1)
        k++;
    return k;
#endif
}

/* The call's key (false: not kept). */
static bool memo_key(cr_rule_mode mode, const cr_value *args, size_t nargs, uint64_t *key)
{
    if (nargs > MEMO_MAX_ARGS)
        return false;
    uint64_t s = 0;
    for (size_t i = 0; i < nargs; i++) {
        uint32_t m = cr_argspec_of(&args[i]).mask;
        if (m & CR_M_STRUCT)
            return false;
        s |= (uint64_t)atom_index(m) << (4 * i); /* 13 atoms: 4 bits */
    }
    *key = s | (uint64_t)nargs << 52 | (uint64_t)mode << 56;
    return true;
}

/* The slot of a call: by function and key only, so that the same call through another
 * registry or configuration takes the same slot (and is told apart by comparing them). */
static memo_slot *memo_at(const cr_function *fn, uint64_t key)
{
    uint64_t h = (uint64_t)(uintptr_t)fn ^ (key * 0x9E3779B97F4A7C15ull);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return &k_memo[(h >> 40) & (MEMO_SLOTS - 1)];
}

/* ---- Storage --------------------------------------------------------------------------- */

static size_t hash_fn(const cr_function *fn, size_t nbuckets)
{
    uintptr_t h = (uintptr_t)fn;
    h ^= h >> 17;
    h *= (uintptr_t)0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    return (size_t)h & (nbuckets - 1);
}

static const cr__entry *first_of(const cr_registry *reg, const cr_function *fn)
{
    if (reg->nbuckets == 0)
        return NULL;
    uint32_t k = reg->buckets[hash_fn(fn, reg->nbuckets)];
    while (k != 0) {
        const cr__entry *e = &reg->entries[k - 1];
        if (e->def.fn == fn)
            return e;
        k = e->next;
    }
    return NULL;
}

static const cr__entry *next_of(const cr_registry *reg, const cr__entry *e)
{
    uint32_t k = e->next;
    while (k != 0) {
        const cr__entry *n = &reg->entries[k - 1];
        if (n->def.fn == e->def.fn)
            return n;
        k = n->next;
    }
    return NULL;
}

static void rehash(cr_registry *reg)
{
    memset(reg->buckets, 0, reg->nbuckets * sizeof *reg->buckets);
    /* Insert in reverse so that chains keep registration order. */
    for (size_t i = reg->n; i-- > 0;) {
        size_t b = hash_fn(reg->entries[i].def.fn, reg->nbuckets);
        reg->entries[i].next = reg->buckets[b];
        reg->buckets[b] = (uint32_t)(i + 1);
    }
}

static cr_status grow(cr_registry *reg)
{
    if (reg->ctx == NULL)
        return CR_ENOMEM; /* the built-in table is static */
    size_t cap = reg->cap ? reg->cap * 2 : 16;
    cr__entry *e = cr__alloc(reg->ctx, cap * sizeof *e);
    if (e == NULL)
        return CR_ENOMEM;
    size_t nb = cap * 2;
    uint32_t *b = cr__alloc(reg->ctx, nb * sizeof *b);
    if (b == NULL) {
        cr__free(reg->ctx, e, cap * sizeof *e);
        return CR_ENOMEM;
    }
    if (reg->n)
        memcpy(e, reg->entries, reg->n * sizeof *e);
    for (size_t i = 0; i < reg->n; i++)
        e[i].def.args = e[i].args;
    cr__free(reg->ctx, reg->entries, reg->cap * sizeof *reg->entries);
    cr__free(reg->ctx, reg->buckets, reg->nbuckets * sizeof *reg->buckets);
    reg->entries = e;
    reg->cap = cap;
    reg->buckets = b;
    reg->nbuckets = nb;
    rehash(reg);
    return CR_OK;
}

cr_status cr_registry_new(cr_ctx *ctx, const cr_registry *parent, cr_registry **out)
{
    if (out == NULL || ctx == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "cr_registry_new: NULL argument");
    *out = NULL;
    cr_registry *r = cr__alloc(ctx, sizeof *r);
    if (r == NULL)
        return CR_ENOMEM;
    *r = (cr_registry){.ctx = ctx, .parent = parent != NULL ? parent : cr_registry_builtin()};
    *out = r;
    return CR_OK;
}

void cr_registry_free(cr_registry *reg)
{
    if (reg == NULL || reg->ctx == NULL)
        return;
    memo_invalidate(); /* another registry may be made at its address */
    cr__free(reg->ctx, reg->entries, reg->cap * sizeof *reg->entries);
    cr__free(reg->ctx, reg->buckets, reg->nbuckets * sizeof *reg->buckets);
    cr__free(reg->ctx, reg, sizeof *reg);
}

cr_status cr_registry_freeze(cr_registry *reg)
{
    if (reg == NULL)
        return CR_EINVAL;
    reg->frozen = true;
    return CR_OK;
}

const cr_registry *cr_registry_parent(const cr_registry *reg)
{
    return reg == NULL ? NULL : reg->parent;
}

size_t cr_registry_size(const cr_registry *reg)
{
    return reg == NULL ? 0 : reg->n;
}

static void fill_info(const cr__entry *e, cr_rule_info *out)
{
    memset(out, 0, sizeof *out);
    out->fn = e->def.fn;
    out->nargs = e->def.nargs;
    out->args = e->def.args;
    out->variadic = e->def.variadic;
    out->caps = e->def.caps;
    out->has_frule = e->def.frule != NULL && !(e->flags & E_NO_FRULE);
    out->has_rrule = e->def.rrule != NULL && !(e->flags & E_NO_RRULE);
    out->no_frule = (e->flags & E_NO_FRULE) != 0;
    out->no_rrule = (e->flags & E_NO_RRULE) != 0;
    out->non_differentiable = (e->flags & E_NONDIFF) != 0;
    out->test = e->def.test;
    out->def = &e->def;
}

cr_status cr_registry_get(const cr_registry *reg, size_t i, cr_rule_info *out)
{
    if (reg == NULL || out == NULL || i >= reg->n)
        return CR_EINVAL;
    fill_info(&reg->entries[i], out);
    return CR_OK;
}

cr_status cr_registry_no_rule(const cr_registry *reg, cr_rule_mode mode, size_t i,
                              cr_rule_info *out)
{
    if (reg == NULL || out == NULL)
        return CR_EINVAL;
    uint32_t want =
        (mode & CR_MODE_FRULE ? E_NO_FRULE : 0) | (mode & CR_MODE_RRULE ? E_NO_RRULE : 0);
    for (size_t k = 0; k < reg->n; k++) {
        if ((reg->entries[k].flags & want) == 0)
            continue;
        if (i-- == 0) {
            fill_info(&reg->entries[k], out);
            return CR_OK;
        }
    }
    return CR_EINVAL;
}

const cr_function *cr_registry_find(const cr_registry *reg, const char *name)
{
    if (name == NULL)
        return NULL;
    for (; reg != NULL; reg = reg->parent)
        for (size_t k = 0; k < reg->n; k++)
            if (strcmp(reg->entries[k].def.fn->name, name) == 0)
                return reg->entries[k].def.fn;
    return NULL;
}

/* ---- Signatures as text ---------------------------------------------------------------- */

static const char *spec_name(cr_argspec m)
{
    static const struct {
        uint32_t mask;
        const char *name;
    } names[] = {
        {CR_M_F64, "f64"},
        {CR_M_F32, "f32"},
        {CR_M_C128, "c128"},
        {CR_M_INT, "int"},
        {CR_M_BOOL, "bool"},
        {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, "real"},
        {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL | CR_M_C128, "number"},
        {CR_M_A_F64, "array{f64}"},
        {CR_M_A_F32, "array{f32}"},
        {CR_M_A_C128, "array{c128}"},
        {CR_M_A_INT, "array{int}"},
        {CR_M_A_BOOL, "array{bool}"},
        {CR_M_A_F64 | CR_M_A_F32 | CR_M_A_C128 | CR_M_A_INT | CR_M_A_BOOL, "array"},
        {CR_M_A_F64 | CR_M_A_F32 | CR_M_A_INT | CR_M_A_BOOL, "array{real}"},
        {CR_M_FUNC, "function"},
        {CR_M_NOTHING, "nothing"},
        {MASK_ALL, "any"},
    };
    if (m.mask == CR_M_STRUCT)
        return m.type != NULL ? m.type->name : "struct";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].mask == m.mask)
            return names[i].name;
    return "union";
}

size_t cr_signature_str(const char *name, const cr_argspec *args, size_t nargs, bool variadic,
                        char *buf, size_t size)
{
    size_t k = 0;
    char tmp[1];
    if (buf == NULL || size == 0) {
        buf = tmp;
        size = 1;
    }
#define CR__APPEND(...)                                                                           \
    do {                                                                                          \
        int w_ = snprintf(buf + (k < size ? k : size - 1), k < size ? size - k : 1, __VA_ARGS__); \
        if (w_ > 0)                                                                               \
            k += (size_t)w_;                                                                      \
    } while (0)
    CR__APPEND("%s(", name != NULL ? name : "?");
    for (size_t i = 0; i < nargs; i++)
        CR__APPEND("%s%s", i ? ", " : "", spec_name(args[i]));
    CR__APPEND("%s)", variadic ? "..." : "");
#undef CR__APPEND
    return k;
}

static void def_str(const cr_rule_def *d, char *buf, size_t size)
{
    size_t k = cr_signature_str(d->fn->name, d->args, d->nargs, d->variadic, buf, size);
    if (d->caps != 0 && k < size)
        snprintf(buf + k, size - k, " [config caps 0x%x]", (unsigned)d->caps);
}

/* ---- Registration ---------------------------------------------------------------------- */

/* The arity at which two definitions' overlap is decided, or 0 when they cannot overlap. */
static size_t overlap_arity(const cr_rule_def *a, const cr_rule_def *b, bool *none)
{
    *none = false;
    if (!a->variadic && !b->variadic) {
        *none = a->nargs != b->nargs;
        return a->nargs;
    }
    if (a->variadic && b->variadic)
        return a->nargs > b->nargs ? a->nargs : b->nargs;
    const cr_rule_def *v = a->variadic ? a : b, *f = a->variadic ? b : a;
    *none = f->nargs + 1 < v->nargs;
    return f->nargs;
}

static bool sig_overlaps(const cr_rule_def *a, const cr_rule_def *b, size_t n, cr_argspec *meet)
{
    for (size_t i = 0; i < n; i++) {
        cr_argspec x, y;
        if (!spec_at(a, i, n, &x) || !spec_at(b, i, n, &y) || !spec_meet(x, y, &meet[i]))
            return false;
    }
    return true;
}

static bool tier(const cr_rule_def *d)
{
    return d->caps != 0;
}

/* Whether some entry (in reg or its parents) has exactly the signature `meet`. */
static bool has_exact(const cr_registry *reg, const cr_function *fn, const cr_argspec *meet,
                      size_t n, uint32_t modes)
{
    for (; reg != NULL; reg = reg->parent)
        for (const cr__entry *e = first_of(reg, fn); e != NULL; e = next_of(reg, e)) {
            if ((modes_of(e) & modes) == 0 || e->def.variadic || e->def.nargs != n)
                continue;
            bool eq = true;
            for (size_t i = 0; i < n && eq; i++)
                eq = spec_equal(e->def.args[i], meet[i]);
            if (eq)
                return true;
        }
    return false;
}

static cr_status check_conflicts(cr_registry *reg, const cr__entry *cand)
{
    const cr_rule_def *d = &cand->def;
    uint32_t modes = modes_of(cand);
    for (const cr_registry *r = reg; r != NULL; r = r->parent) {
        for (const cr__entry *e = first_of(r, d->fn); e != NULL; e = next_of(r, e)) {
            if ((modes_of(e) & modes) == 0 || tier(&e->def) != tier(d))
                continue;
            bool none;
            size_t n = overlap_arity(d, &e->def, &none);
            cr_argspec meet[CR_SIG_MAX_ARGS + 1];
            if (none || !sig_overlaps(d, &e->def, n, meet))
                continue;
            bool ab = at_least_as_specific(d, &e->def, n);
            bool ba = at_least_as_specific(&e->def, d, n);
            char s1[160], s2[160];
            if (ab && ba) {
                if (r != reg)
                    continue; /* overriding a parent's rule */
                def_str(d, s1, sizeof s1);
                return cr_ctx_error(reg->ctx, CR_EINVAL,
                                    "rule %s is already registered in this registry", s1);
            }
            if (ab || ba)
                continue;
            if (has_exact(reg, d->fn, meet, n, modes))
                continue;
            def_str(d, s1, sizeof s1);
            def_str(&e->def, s2, sizeof s2);
            return cr_ctx_error(reg->ctx, CR_EINVAL,
                                "rule %s is ambiguous with %s: neither is more specific; "
                                "register their intersection first",
                                s1, s2);
        }
    }
    return CR_OK;
}

static cr_status validate(cr_registry *reg, const cr_rule_def *def)
{
    if (def->fn == NULL || def->fn->name == NULL)
        return cr_ctx_error(reg->ctx, CR_EINVAL, "rule definition without a function or name");
    if (def->nargs > CR_SIG_MAX_ARGS || (def->nargs > 0 && def->args == NULL) ||
        (def->variadic && def->nargs == 0))
        return cr_ctx_error(reg->ctx, CR_EINVAL, "rule for %s: bad signature (%zu matchers)",
                            def->fn->name, def->nargs);
    for (size_t i = 0; i < def->nargs; i++)
        if (def->args[i].mask == 0 || (def->args[i].mask & ~MASK_ALL) != 0)
            return cr_ctx_error(reg->ctx, CR_EINVAL, "rule for %s: empty matcher at %zu",
                                def->fn->name, i);
    return CR_OK;
}

static cr_status add_entry(cr_registry *reg, const cr_rule_def *def, uint32_t flags)
{
    if (reg == NULL)
        return CR_EINVAL;
    if (reg->frozen)
        return cr_ctx_error(reg->ctx, CR_EMISUSE, "registry is frozen: no more registrations");
    cr_status st = validate(reg, def);
    if (st != CR_OK)
        return st;
    cr__entry cand;
    memset(&cand, 0, sizeof cand);
    size_t sz = def->struct_size == 0 ? sizeof cand.def : def->struct_size;
    /* two versions: the first ends before linearity (then CR_NONLINEAR, no form); another
     * size cuts a field */
    if (sz != sizeof cand.def && sz != offsetof(cr_rule_def, linearity))
        return cr_ctx_error(reg->ctx, CR_EINVAL, "cr_rule_def: unknown struct_size %zu", sz);
    memcpy(&cand.def, def, sz);
    if (cand.def.linearity > CR_PIECEWISE_LINEAR)
        return cr_ctx_error(reg->ctx, CR_EINVAL, "rule for %s: unknown linearity class %u",
                            def->fn->name, (unsigned)cand.def.linearity);
    if (cand.def.form != NULL && cand.def.form->dir == NULL)
        return cr_ctx_error(reg->ctx, CR_EINVAL, "rule for %s: a second-order form without dir",
                            def->fn->name);
    if (def->nargs)
        memcpy(cand.args, def->args, def->nargs * sizeof *def->args);
    cand.def.args = cand.args;
    cand.flags = flags;
    if ((flags & (E_NO_FRULE | E_NO_RRULE)) == 0 && def->frule == NULL && def->rrule == NULL)
        return cr_ctx_error(reg->ctx, CR_EINVAL, "rule for %s has neither frule nor rrule",
                            def->fn->name);
    st = check_conflicts(reg, &cand);
    if (st != CR_OK)
        return st;
    if (reg->n == reg->cap) {
        st = grow(reg);
        if (st != CR_OK)
            return reg->ctx ? st : CR_ENOMEM;
    }
    reg->entries[reg->n] = cand;
    reg->entries[reg->n].def.args = reg->entries[reg->n].args;
    reg->n++;
    rehash(reg);
    memo_invalidate();
    return CR_OK;
}

cr_status cr_registry_add(cr_registry *reg, const cr_rule_def *def)
{
    if (def == NULL)
        return reg != NULL ? cr_ctx_error(reg->ctx, CR_EINVAL, "cr_registry_add: NULL def")
                           : CR_EINVAL;
    return add_entry(reg, def, 0);
}

cr_status cr__register(cr_registry *reg, const cr_function *fn, const cr_argspec *args,
                       size_t nargs, bool variadic, cr_frule_fn frule, cr_rrule_fn rrule,
                       const void *udata, const cr_rule_test *test)
{
    cr_rule_def d = {.fn = fn, .args = args, .nargs = nargs, .variadic = variadic};
    d.frule = frule;
    d.rrule = rrule;
    d.udata = udata;
    d.test = test;
    return cr_registry_add(reg, &d);
}

cr_status cr_registry_opt_out(cr_registry *reg, cr_rule_mode mode, const cr_function *fn,
                              const cr_argspec *args, size_t nargs, bool variadic, uint32_t caps)
{
    cr_rule_def d = {.fn = fn, .args = args, .nargs = nargs, .variadic = variadic, .caps = caps};
    uint32_t flags =
        (mode & CR_MODE_FRULE ? E_NO_FRULE : 0) | (mode & CR_MODE_RRULE ? E_NO_RRULE : 0);
    if (flags == 0)
        return reg != NULL ? cr_ctx_error(reg->ctx, CR_EINVAL, "opt_out: no mode") : CR_EINVAL;
    return add_entry(reg, &d, flags);
}

cr_status cr_registry_non_differentiable(cr_registry *reg, const cr_function *fn,
                                         const cr_argspec *args, size_t nargs, bool variadic)
{
    if (fn != NULL && fn->primal == NULL)
        return reg != NULL
                   ? cr_ctx_error(reg->ctx, CR_EINVAL,
                                  "non_differentiable %s: the function has no primal", fn->name)
                   : CR_EINVAL;
    cr_rule_def d = {.fn = fn,
                     .args = args,
                     .nargs = nargs,
                     .variadic = variadic,
                     .frule = cr__nondiff_frule,
                     .rrule = cr__nondiff_rrule};
    return add_entry(reg, &d, E_NONDIFF);
}

/* ---- Lookup ---------------------------------------------------------------------------- */

#define MAX_CANDIDATES 64

/* Whether entry e of tier t applies to the call. */
static bool applies(const cr__entry *e, int t, uint32_t caps, cr_rule_mode mode,
                    const cr_value *args, size_t nargs)
{
    return (modes_of(e) & (uint32_t)mode) != 0 && (int)tier(&e->def) == t &&
           (e->def.caps & caps) == e->def.caps && sig_matches(&e->def, args, nargs);
}

/* The first applicable entry of tier t at least as specific as every other one, found in
 * place: for calls that more rules match than lookup_rank's array holds. */
static const cr__entry *rank_in_place(const cr_registry *reg, int t, uint32_t caps,
                                      cr_rule_mode mode, const cr_function *fn,
                                      const cr_value *args, size_t nargs)
{
    for (const cr_registry *r = reg; r != NULL; r = r->parent)
        for (const cr__entry *e = first_of(r, fn); e != NULL; e = next_of(r, e)) {
            if (!applies(e, t, caps, mode, args, nargs))
                continue;
            bool ok = true;
            for (const cr_registry *r2 = reg; r2 != NULL && ok; r2 = r2->parent)
                for (const cr__entry *o = first_of(r2, fn); o != NULL && ok; o = next_of(r2, o))
                    if (o != e && applies(o, t, caps, mode, args, nargs) &&
                        !at_least_as_specific(&e->def, &o->def, nargs))
                        ok = false;
            if (ok)
                return e;
        }
    return NULL;
}

/* The answer for the most specific entry (NULL: none, the candidates are incomparable). */
static cr_status ranked(const cr__entry *best, cr_rule_mode mode, cr_rule_match *out)
{
    if (best == NULL)
        return CR_EMISUSE;
    bool no = mode == CR_MODE_FRULE ? (best->flags & E_NO_FRULE) : (best->flags & E_NO_RRULE);
    if (no) {
        out->opted_out = true;
        return CR_OK;
    }
    out->def = &best->def;
    return CR_OK;
}

/* The lookup itself: candidates by tier, then the most specific (see design.md). */
static cr_status lookup_rank(const cr_registry *reg, uint32_t caps, cr_rule_mode mode,
                             const cr_function *fn, const cr_value *args, size_t nargs,
                             cr_rule_match *out)
{
    const cr__entry *cand[MAX_CANDIDATES];
    size_t nc = 0;
    /* Config-specific rules first (tier 1), config-free ones only if none applies. */
    for (int t = 1; t >= 0 && nc == 0; t--) {
        for (const cr_registry *r = reg; r != NULL; r = r->parent)
            for (const cr__entry *e = first_of(r, fn); e != NULL; e = next_of(r, e)) {
                if (!applies(e, t, caps, mode, args, nargs))
                    continue;
                if (nc == MAX_CANDIDATES) /* more matching rules than the array holds */
                    return ranked(rank_in_place(reg, t, caps, mode, fn, args, nargs), mode, out);
                cand[nc++] = e;
            }
    }
    if (nc == 0)
        return CR_NOTHING;
    /* The unique most specific candidate; on equal signatures the first (child) wins. */
    const cr__entry *best = NULL;
    for (size_t i = 0; i < nc && best == NULL; i++) {
        bool ok = true;
        for (size_t j = 0; j < nc && ok; j++)
            if (j != i && !at_least_as_specific(&cand[i]->def, &cand[j]->def, nargs))
                ok = false;
        if (ok)
            best = cand[i];
    }
    return ranked(best, mode, out);
}

cr_status cr_registry_lookup(const cr_registry *reg, const cr_config *cfg, cr_rule_mode mode,
                             const cr_value *f, const cr_value *args, size_t nargs,
                             cr_rule_match *out)
{
    if (out == NULL || f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL ||
        (nargs > 0 && args == NULL) || (mode != CR_MODE_FRULE && mode != CR_MODE_RRULE))
        return CR_EINVAL;
    out->def = NULL;
    out->opted_out = false;
    if (reg == NULL)
        reg = cfg != NULL && cfg->registry != NULL ? cfg->registry : cr_registry_builtin();
    uint32_t caps = cfg != NULL ? cfg->caps : 0;
    const cr_function *fn = f->u.func.fn;
    uint64_t key;
    if (!memo_key(mode, args, nargs, &key))
        return lookup_rank(reg, caps, mode, fn, args, nargs, out);
    uint64_t gen = atomic_load_explicit(&k_memo_gen, memory_order_acquire);
    memo_slot *m = memo_at(fn, key);
    if (m->gen == gen && m->reg == reg && m->fn == fn && m->key == key && m->caps == caps) {
        out->def = m->def;
        out->opted_out = m->opted_out;
        return m->st;
    }
    cr_status st = lookup_rank(reg, caps, mode, fn, args, nargs, out);
    if (st == CR_OK || st == CR_NOTHING) {
        m->gen = gen;
        m->reg = reg;
        m->fn = fn;
        m->key = key;
        m->caps = caps;
        m->opted_out = out->opted_out;
        m->st = st;
        m->def = out->def;
    }
    return st;
}

/* ---- The built-in registry ------------------------------------------------------------- */

#define BUILTIN_CAP 2048
static cr__entry k_builtin_entries[BUILTIN_CAP];
static uint32_t k_builtin_buckets[2 * BUILTIN_CAP];
static cr_registry k_builtin;
static cr_status k_builtin_status;
static pthread_once_t k_builtin_once = PTHREAD_ONCE_INIT;

static void builtin_init(void)
{
    k_builtin.ctx = NULL;
    k_builtin.entries = k_builtin_entries;
    k_builtin.cap = BUILTIN_CAP;
    k_builtin.buckets = k_builtin_buckets;
    k_builtin.nbuckets = 2 * BUILTIN_CAP;
    k_builtin_status = cr__builtin_families(&k_builtin);
    k_builtin.frozen = true;
}

const cr_registry *cr_registry_builtin(void)
{
    pthread_once(&k_builtin_once, builtin_init);
    return &k_builtin;
}

cr_status cr_registry_builtin_status(void)
{
    cr_registry_builtin();
    return k_builtin_status;
}
