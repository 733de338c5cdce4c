/*
 * GradBench's hand-tracking objective, "simple" and "complicated" variants
 * (cpp/gradbench/evals/ht.hpp, from ADBench): a skinned hand model posed by 26 parameters
 * theta (global rotation, global translation, 4 angles per finger); the errors are the
 * differences between measured points and the posed model's vertices (simple) or points
 * given by barycentric coordinates us on the model's triangles (complicated).
 *
 * Matrices are row-major 4 x 4 (M[r*4 + c]); the vertex positions are vertex-major. Both
 * variants are one function, ht_errors(): the bones' transforms, the global rotation, then
 * the errors, by one of two paths. When the points read more vertex instances than the
 * model has vertices (npts * (triangles ? 3 : 1) > nverts), every vertex is skinned (over
 * the bones whose weight is nonzero) and posed once (ht_errors_posed()); otherwise point by
 * point only the vertices the point reads are skinned, blended, and the global transform
 * applied to the blend (ht_errors_per_point()), so that a small set of points does not pay
 * for the whole model and a large one does not skin a vertex again for each point.
 */
#include <math.h>
#include <stddef.h>

#include "objectives.h"

/* HT_SKIN_VERTEX(v, p0, p1, p2): the skinned position (p0, p1, p2) of vertex v before the
 * global transform, sum_b weight(v, b) (transform_b * base_position(v))[0..2] over the
 * bones that move it (a few of the model's weights are nonzero: 1.7 of 22 on average in
 * GradBench's models): statements that declare p0, p1 and p2 (and, in the loop, b, wv, bb
 * and x0..x3) and read nbones, base_positions, weights and transforms. A macro, not a
 * function: the forward modes run a call of a function of the file on full tangents (every
 * lane of the arrays it reads and writes), which made the Jacobian 2-3 times slower here; the
 * expanded statements keep their lane ranges. (A while loop: chainrules-ad reads a for
 * statement's parts from its tokens, which a macro's expansion does not give.) */
#define HT_SKIN_VERTEX(v, p0, p1, p2)                                                             \
    double p0 = 0.0;                                                                              \
    double p1 = 0.0;                                                                              \
    double p2 = 0.0;                                                                              \
    int b = 0;                                                                                    \
    while (b < nbones) {                                                                          \
        double wv = weights[(v)*nbones + b];                                                      \
        if (wv != 0.0) {                                                                          \
            int bb = b * 16;                                                                      \
            double x0 = base_positions[(v)*4];                                                    \
            double x1 = base_positions[(v)*4 + 1];                                                \
            double x2 = base_positions[(v)*4 + 2];                                                \
            double x3 = base_positions[(v)*4 + 3];                                                \
            p0 += (transforms[bb] * x0 + transforms[bb + 1] * x1 + transforms[bb + 2] * x2 +      \
                   transforms[bb + 3] * x3) *                                                     \
                  wv;                                                                             \
            p1 += (transforms[bb + 4] * x0 + transforms[bb + 5] * x1 + transforms[bb + 6] * x2 +  \
                   transforms[bb + 7] * x3) *                                                     \
                  wv;                                                                             \
            p2 += (transforms[bb + 8] * x0 + transforms[bb + 9] * x1 + transforms[bb + 10] * x2 + \
                   transforms[bb + 11] * x3) *                                                    \
                  wv;                                                                             \
        }                                                                                         \
        b++;                                                                                      \
    }

/* HT_ERRORS_POSED(name, maxv): defines the function `name` computing the errors when the
 * points read more vertex instances than the model has vertices (nverts <= maxv): every
 * vertex is skinned once and globally transformed into a local array of the posed model
 * (maxv x 3 values), which the points then read. Two sizes are defined: models of at most
 * HT_POSED_SMALL vertices (GradBench's small model has 544) pose into the smaller array, as
 * the vector forward mode sets the lane ranges of every element of a local array on every
 * call (its tangent, declared with no initialiser, is not zeroed): 3 x HT_MAX_VERTS pairs
 * of ints for the large one, 3 x HT_POSED_SMALL for the small. The bones' transforms and the global
 * transform are first copied into local arrays: a parameter's tangent carries no lane
 * range in the vector forward mode, so every read of one would search its nonzero lanes
 * (28 per element, for each of 12 elements per bone a vertex reads and 12 per vertex),
 * while a local's range is kept beside it. A macro, so that the two sizes are written once
 * (while loops: chainrules-ad reads a for statement's parts from its tokens, which a
 * macro's expansion does not give). */
#define HT_ERRORS_POSED(name, maxv)                                                             \
    static void name(int nbones, int nverts, int npts, const double *base_positions,            \
                     const double *weights, const double *transforms_in, const double *g_in,    \
                     int is_mirrored, const int *correspondences, const int *triangles,         \
                     const double *points, const double *us, double *err)                       \
    {                                                                                           \
        double positions[3 * (maxv)];                                                           \
        double transforms[16 * HT_MAX_BONES];                                                   \
        double g[12];                                                                           \
        int k = 0;                                                                              \
        while (k < 16 * nbones) {                                                               \
            transforms[k] = transforms_in[k];                                                   \
            k++;                                                                                \
        }                                                                                       \
        k = 0;                                                                                  \
        while (k < 12) {                                                                        \
            g[k] = g_in[k];                                                                     \
            k++;                                                                                \
        }                                                                                       \
        int v = 0;                                                                              \
        while (v < nverts) {                                                                    \
            HT_SKIN_VERTEX(v, p0, p1, p2)                                                       \
            if (is_mirrored)                                                                    \
                p0 = -p0;                                                                       \
            int r = 0;                                                                          \
            while (r < 3) {                                                                     \
                positions[v * 3 + r] =                                                          \
                    g[r * 4] * p0 + g[r * 4 + 1] * p1 + g[r * 4 + 2] * p2 + g[r * 4 + 3];       \
                r++;                                                                            \
            }                                                                                   \
            v++;                                                                                \
        }                                                                                       \
        int i = 0;                                                                              \
        while (i < npts) {                                                                      \
            if (triangles) {                                                                    \
                /* the point of triangle correspondences[i] at barycentric coordinates us[i] */ \
                int t = correspondences[i];                                                     \
                int v0 = triangles[t * 3];                                                      \
                int v1 = triangles[t * 3 + 1];                                                  \
                int v2 = triangles[t * 3 + 2];                                                  \
                double u0 = us[i * 2];                                                          \
                double u1 = us[i * 2 + 1];                                                      \
                double u2 = 1.0 - u0 - u1;                                                      \
                int r = 0;                                                                      \
                while (r < 3) {                                                                 \
                    err[i * 3 + r] = points[i * 3 + r] -                                        \
                                     (u0 * positions[v0 * 3 + r] + u1 * positions[v1 * 3 + r] + \
                                      u2 * positions[v2 * 3 + r]);                              \
                    r++;                                                                        \
                }                                                                               \
            } else {                                                                            \
                int vi = correspondences[i];                                                    \
                int r = 0;                                                                      \
                while (r < 3) {                                                                 \
                    err[i * 3 + r] = points[i * 3 + r] - positions[vi * 3 + r];                 \
                    r++;                                                                        \
                }                                                                               \
            }                                                                                   \
            i++;                                                                                \
        }                                                                                       \
    }

HT_ERRORS_POSED(ht_errors_posed_small, HT_POSED_SMALL)
HT_ERRORS_POSED(ht_errors_posed, HT_MAX_VERTS)

/* The errors of both variants: the simple one when triangles and us are NULL. */
static void ht_errors(int nbones, int nverts, int npts, const int *parents,
                      const double *base_relatives, const double *inverse_base_absolutes,
                      const double *base_positions, const double *weights, int is_mirrored,
                      const int *correspondences, const int *triangles, const double *points,
                      const double *theta, const double *us, double *err)
{
    double pose[3 * (HT_MAX_BONES + 3)]; /* pose[col*3 + row] */
    double rel[16];
    double absolutes[16 * HT_MAX_BONES];
    double transforms[16 * HT_MAX_BONES];

    /* to_pose_params: column 0 global rotation, 1 scale (ones), 2 translation, then
     * column 3 + b the Euler angles of bone b. */
    for (int i = 0; i < 3 * (nbones + 3); i++)
        pose[i] = 0.0;
    for (int r = 0; r < 3; r++) {
        pose[r] = theta[r];
        pose[3 + r] = 1.0;
        pose[6 + r] = theta[3 + r];
    }
    int it = 6;
    int ipp = 5;
    for (int finger = 0; finger < 5; finger++) {
        for (int i = 2; i <= 4; i++) {
            pose[ipp * 3] = theta[it];
            it++;
            if (i == 2) {
                pose[ipp * 3 + 1] = theta[it];
                it++;
            }
            ipp++;
        }
        ipp++;
    }

    /* get_posed_relatives and relatives_to_absolutes: relative = base_relative * [R 0; 0 1]
     * with R = Rz(a[1]) Ry(a[2]) Rx(a[0]); absolute = absolute(parent) * relative. */
    for (int b = 0; b < nbones; b++) {
        int pc = (b + 3) * 3;
        double cx = cos(pose[pc]);
        double sx = sin(pose[pc]);
        double cz = cos(pose[pc + 1]);
        double sz = sin(pose[pc + 1]);
        double cy = cos(pose[pc + 2]);
        double sy = sin(pose[pc + 2]);
        /* Rz Ry = [cz cy, -sz, cz sy; sz cy, cz, sz sy; -sy, 0, cy], times Rx */
        double r00 = cz * cy;
        double r01 = -sz * cx + cz * sy * sx;
        double r02 = -sz * -sx + cz * sy * cx;
        double r10 = sz * cy;
        double r11 = cz * cx + sz * sy * sx;
        double r12 = cz * -sx + sz * sy * cx;
        double r20 = -sy;
        double r21 = cy * sx;
        double r22 = cy * cx;
        int bb = b * 16;
        for (int i = 0; i < 4; i++) {
            double b0 = base_relatives[bb + i * 4];
            double b1 = base_relatives[bb + i * 4 + 1];
            double b2 = base_relatives[bb + i * 4 + 2];
            rel[i * 4] = b0 * r00 + b1 * r10 + b2 * r20;
            rel[i * 4 + 1] = b0 * r01 + b1 * r11 + b2 * r21;
            rel[i * 4 + 2] = b0 * r02 + b1 * r12 + b2 * r22;
            rel[i * 4 + 3] = base_relatives[bb + i * 4 + 3];
        }
        int pa = parents[b];
        if (pa < 0) {
            for (int i = 0; i < 16; i++)
                absolutes[bb + i] = rel[i];
        } else {
            for (int i = 0; i < 4; i++) {
                for (int k = 0; k < 4; k++) {
                    double s = absolutes[pa * 16 + i * 4] * rel[k];
                    for (int j = 1; j < 4; j++)
                        s += absolutes[pa * 16 + i * 4 + j] * rel[j * 4 + k];
                    absolutes[bb + i * 4 + k] = s;
                }
            }
        }
        /* transform = absolute * inverse_base_absolute */
        for (int i = 0; i < 4; i++) {
            for (int k = 0; k < 4; k++) {
                double s = absolutes[bb + i * 4] * inverse_base_absolutes[bb + k];
                for (int j = 1; j < 4; j++)
                    s += absolutes[bb + i * 4 + j] * inverse_base_absolutes[bb + j * 4 + k];
                transforms[bb + i * 4 + k] = s;
            }
        }
    }

    /* apply_global_transform: R(angle axis theta[0..2]) (times the unit scale), then the
     * translation. */
    double g00 = 1.0, g01 = 0.0, g02 = 0.0;
    double g10 = 0.0, g11 = 1.0, g12 = 0.0;
    double g20 = 0.0, g21 = 0.0, g22 = 1.0;
    double norm = sqrt(pose[0] * pose[0] + pose[1] * pose[1] + pose[2] * pose[2]);
    if (norm >= 0.0001) {
        double ax = pose[0] / norm;
        double ay = pose[1] / norm;
        double az = pose[2] / norm;
        double s = sin(norm);
        double c = cos(norm);
        g00 = ax * ax + (1 - ax * ax) * c;
        g01 = ax * ay * (1 - c) - az * s;
        g02 = ax * az * (1 - c) + ay * s;
        g10 = ax * ay * (1 - c) + az * s;
        g11 = ay * ay + (1 - ay * ay) * c;
        g12 = ay * az * (1 - c) - ax * s;
        g20 = ax * az * (1 - c) - ay * s;
        g21 = az * ay * (1 - c) + ax * s;
        g22 = az * az + (1 - az * az) * c;
    }

    double g[12]; /* rows [G t] */
    g[0] = g00;
    g[1] = g01;
    g[2] = g02;
    g[3] = pose[6];
    g[4] = g10;
    g[5] = g11;
    g[6] = g12;
    g[7] = pose[7];
    g[8] = g20;
    g[9] = g21;
    g[10] = g22;
    g[11] = pose[8];

    /* The points read one vertex (simple) or a triangle's three (complicated) each. When
     * they read more vertex instances than the model has vertices, every vertex is posed
     * once (ht_errors_posed). Otherwise only the read ones are skinned, point by point, and
     * blended (u0 p(v0) + u1 p(v1) + u2 p(v2), or p(v)); the global transform, linear,
     * applies once to the blend: sum_j u_j (G p_j + t) = G (sum_j u_j p_j) + t as
     * u0 + u1 + u2 = 1. A vertex read by several points is then skinned again for each. */
    int nv = triangles ? 3 : 1;
    if (npts > nverts / nv) {
        if (nverts <= HT_POSED_SMALL)
            ht_errors_posed_small(nbones, nverts, npts, base_positions, weights, transforms, g,
                                  is_mirrored, correspondences, triangles, points, us, err);
        else
            ht_errors_posed(nbones, nverts, npts, base_positions, weights, transforms, g,
                            is_mirrored, correspondences, triangles, points, us, err);
    } else {
        for (int i = 0; i < npts; i++) {
            double q0 = 0.0;
            double q1 = 0.0;
            double q2 = 0.0;
            double u0 = 1.0;
            double u1 = 0.0;
            double u2 = 0.0;
            if (triangles) {
                u0 = us[i * 2];
                u1 = us[i * 2 + 1];
                u2 = 1.0 - u0 - u1;
            }
            for (int j = 0; j < nv; j++) {
                int v = triangles ? triangles[correspondences[i] * 3 + j] : correspondences[i];
                HT_SKIN_VERTEX(v, p0, p1, p2)
                double u = u2;
                if (j == 0)
                    u = u0;
                else if (j == 1)
                    u = u1;
                q0 += u * p0;
                q1 += u * p1;
                q2 += u * p2;
            }
            if (is_mirrored)
                q0 = -q0;
            for (int r = 0; r < 3; r++)
                err[i * 3 + r] = points[i * 3 + r] - (g[r * 4] * q0 + g[r * 4 + 1] * q1 +
                                                      g[r * 4 + 2] * q2 + g[r * 4 + 3]);
        }
    }
}

void ht_objective(int nbones, int nverts, int npts, const int *parents,
                  const double *base_relatives, const double *inverse_base_absolutes,
                  const double *base_positions, const double *weights, int is_mirrored,
                  const int *correspondences, const double *points, const double *theta,
                  double *err)
{
    if (nbones < HT_MIN_BONES || nbones > HT_MAX_BONES || nverts < 1 || nverts > HT_MAX_VERTS) {
        for (int i = 0; i < 3 * npts; i++)
            err[i] = 0.0 / 0.0;
        return;
    }
    ht_errors(nbones, nverts, npts, parents, base_relatives, inverse_base_absolutes, base_positions,
              weights, is_mirrored, correspondences, NULL, points, theta, NULL, err);
}

void ht_objective_complicated(int nbones, int nverts, int npts, const int *parents,
                              const double *base_relatives, const double *inverse_base_absolutes,
                              const double *base_positions, const double *weights, int is_mirrored,
                              const int *correspondences, const int *triangles,
                              const double *points, const double *theta, const double *us,
                              double *err)
{
    if (nbones < HT_MIN_BONES || nbones > HT_MAX_BONES || nverts < 1 || nverts > HT_MAX_VERTS) {
        for (int i = 0; i < 3 * npts; i++)
            err[i] = 0.0 / 0.0;
        return;
    }
    ht_errors(nbones, nverts, npts, parents, base_relatives, inverse_base_absolutes, base_positions,
              weights, is_mirrored, correspondences, triangles, points, theta, us, err);
}
