/*
 * Test reports: verdict names and ranks, recording checks (the worst one describes the
 * report), merging and the one-line summary.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "testing_impl.h"

/* Each verdict's name and rank (BROKEN ranks below FAIL). */
static const struct {
    const char *name;
    int rank;
} k_verdicts[] = {[CR_VERDICT_PASS] = {"PASS", 0},
                  [CR_VERDICT_MARGINAL] = {"MARGINAL", 1},
                  [CR_VERDICT_FAIL] = {"FAIL", 3},
                  [CR_VERDICT_BROKEN] = {"BROKEN", 2}};

static bool verdict_known(cr_verdict v)
{
    return (unsigned)v < sizeof k_verdicts / sizeof k_verdicts[0];
}

const char *cr_verdict_name(cr_verdict v)
{
    return verdict_known(v) ? k_verdicts[v].name : "?";
}

int cr_verdict_rank(cr_verdict v)
{
    return verdict_known(v) ? k_verdicts[v].rank : 3;
}

void cr_test_report_init(cr_test_report *r)
{
    if (r == NULL)
        return;
    memset(r, 0, sizeof *r);
    r->verdict = CR_VERDICT_PASS;
}

/* Whether a check (verdict v, ratio) should describe the report instead of its current
 * worst check. */
static bool takes_over(const cr_test_report *r, cr_verdict v, double ratio)
{
    if (r->nchecks == 0)
        return true;
    int a = cr_verdict_rank(v), b = cr_verdict_rank(r->verdict);
    if (a != b)
        return a > b;
    if (v == CR_VERDICT_PASS)
        return false;
    /* Among failures and marginals the larger error ratio; the first otherwise. */
    return ratio > r->worst_ratio || (isnan(ratio) && !isnan(r->worst_ratio));
}

static void count(cr_test_report *r, cr_verdict v, size_t n)
{
    switch (v) {
    case CR_VERDICT_PASS:
        r->npassed += n;
        break;
    case CR_VERDICT_MARGINAL:
        r->nmarginal += n;
        break;
    case CR_VERDICT_BROKEN:
        r->nbroken += n;
        break;
    case CR_VERDICT_FAIL:
    default:
        r->nfailed += n;
        break;
    }
}

void cr__test_note(cr_test_report *r, cr_verdict v, double ratio, const char *where,
                   const char *fmt, ...)
{
    bool take = takes_over(r, v, ratio);
    if (take) {
        r->verdict = v;
        snprintf(r->where, sizeof r->where, "%s", where != NULL ? where : "");
        if (fmt != NULL) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->message, sizeof r->message, fmt, ap);
            va_end(ap);
        } else {
            r->message[0] = '\0';
        }
        if (v == CR_VERDICT_PASS)
            r->where[0] = r->message[0] = '\0';
    }
    if (ratio > r->worst_ratio || (isnan(ratio) && !isnan(r->worst_ratio)))
        r->worst_ratio = ratio;
    r->nchecks++;
    count(r, v, 1);
}

void cr__test_errors(cr_test_report *r, double abs_err, double rel_err)
{
    if (abs_err > r->max_abs_err || (isnan(abs_err) && !isnan(r->max_abs_err)))
        r->max_abs_err = abs_err;
    if (rel_err > r->max_rel_err || (isnan(rel_err) && !isnan(r->max_rel_err)))
        r->max_rel_err = rel_err;
}

void cr_test_report_merge(cr_test_report *dst, const cr_test_report *src)
{
    if (dst == NULL || src == NULL)
        return;
    if (src->nchecks > 0) {
        bool take = dst->nchecks == 0 || takes_over(dst, src->verdict, src->worst_ratio);
        if (take) {
            dst->verdict = src->verdict;
            memcpy(dst->where, src->where, sizeof dst->where);
            memcpy(dst->message, src->message, sizeof dst->message);
        }
    }
    if (src->worst_ratio > dst->worst_ratio ||
        (isnan(src->worst_ratio) && !isnan(dst->worst_ratio)))
        dst->worst_ratio = src->worst_ratio;
    cr__test_errors(dst, src->max_abs_err, src->max_rel_err);
    dst->nchecks += src->nchecks;
    dst->npassed += src->npassed;
    dst->nmarginal += src->nmarginal;
    dst->nfailed += src->nfailed;
    dst->nbroken += src->nbroken;
    dst->npoints += src->npoints;
    dst->nskipped += src->nskipped;
    if (dst->skip_note[0] == '\0')
        memcpy(dst->skip_note, src->skip_note, sizeof dst->skip_note);
}

size_t cr_test_report_format(const cr_test_report *r, char *buf, size_t size)
{
    char tmp[1024];
    if (r == NULL)
        return (size_t)snprintf(buf, size, "(no report)");
    size_t len = 0;
    int n = snprintf(tmp, sizeof tmp, "%s: %zu check%s (%zu passed", cr_verdict_name(r->verdict),
                     r->nchecks, r->nchecks == 1 ? "" : "s", r->npassed);
    len = n > 0 ? (size_t)n : 0;
#define APPEND(...)                                                      \
    do {                                                                 \
        if (len < sizeof tmp) {                                          \
            int m_ = snprintf(tmp + len, sizeof tmp - len, __VA_ARGS__); \
            if (m_ > 0)                                                  \
                len += (size_t)m_;                                       \
        }                                                                \
    } while (0)
    if (r->nmarginal)
        APPEND(", %zu marginal", r->nmarginal);
    if (r->nbroken)
        APPEND(", %zu broken", r->nbroken);
    if (r->nfailed)
        APPEND(", %zu failed", r->nfailed);
    APPEND(")");
    if (r->npoints > 1 || r->nskipped)
        APPEND(" at %zu point%s", r->npoints, r->npoints == 1 ? "" : "s");
    if (r->nskipped)
        APPEND(" (%zu skipped)", r->nskipped);
    APPEND(", max abs err %.2g, max rel err %.2g", r->max_abs_err, r->max_rel_err);
    if (r->verdict != CR_VERDICT_PASS || r->message[0] != '\0')
        APPEND(" -- %s%s%s", r->where, r->where[0] && r->message[0] ? ": " : "", r->message);
#undef APPEND
    if (len >= sizeof tmp)
        len = sizeof tmp - 1;
    if (buf != NULL && size > 0) {
        size_t c = len < size - 1 ? len : size - 1;
        memcpy(buf, tmp, c);
        buf[c] = '\0';
    }
    return len;
}
