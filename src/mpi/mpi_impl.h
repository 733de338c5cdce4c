/*
 * Private to chainrules-mpi (src/mpi): what the tape calls (mpi.c) and the forward-mode calls
 * on dual numbers (dual.c) share.
 */
#ifndef CR_MPI_IMPL_H
#define CR_MPI_IMPL_H

#include <stdio.h>

#include <chainrules/mpi.h>

/* The counts and displacements of the v collectives (p ranks) against a buffer of total
 * elements: CR_EINVAL for NULL arrays, CR_ESHAPE for a block outside the buffer and `overlap`
 * for two overlapping blocks (CR_OK: allowed), with the message, naming who, in msg. */
static inline cr_status cr__mpi_check_blocks(const char *who, const int *counts, const int *displs,
                                             int p, size_t total, cr_status overlap, char *msg,
                                             size_t size)
{
    if (counts == NULL || displs == NULL) {
        snprintf(msg, size, "%s: NULL counts or displacements", who);
        return CR_EINVAL;
    }
    for (int r = 0; r < p; r++) {
        if (counts[r] < 0 || displs[r] < 0 || (size_t)displs[r] + (size_t)counts[r] > total) {
            snprintf(msg, size, "%s: block %d (%d elements at %d) is outside the buffer of %zu",
                     who, r, counts[r], displs[r], total);
            return CR_ESHAPE;
        }
        for (int s = 0; overlap != CR_OK && s < r; s++)
            if (counts[r] > 0 && counts[s] > 0 && displs[r] < displs[s] + counts[s] &&
                displs[s] < displs[r] + counts[r]) {
                snprintf(msg, size, "%s: blocks %d and %d overlap", who, s, r);
                return overlap;
            }
    }
    return CR_OK;
}

#endif /* CR_MPI_IMPL_H */
