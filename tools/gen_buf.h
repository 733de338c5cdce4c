/*
 * The growable text buffer of the generators (gen_rules_doc.c, gen_dual_rows.c), which
 * write a whole file in memory before comparing or replacing it. Header-only; GEN_PROG
 * names the program in its messages. Being tools, they stop (status 2) on a failure.
 */
#ifndef CR_GEN_BUF_H
#define CR_GEN_BUF_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GEN_PROG
#error "define GEN_PROG (the program's name) before including gen_buf.h"
#endif

/* A growable string. */
typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t len)
{
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->n + len + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            fputs(GEN_PROG ": out of memory\n", stderr);
            exit(2);
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
printf_(buf *b, const char *fmt, ...)
{
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        fputs(GEN_PROG ": line too long\n", stderr);
        exit(2);
    }
    put(b, tmp, (size_t)n);
}

#endif /* CR_GEN_BUF_H */
