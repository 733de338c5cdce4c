/*
 * GradBench's kmeans eval (cpp/gradbench/evals/kmeans.hpp): the k-means cost, the sum
 * over the points of the squared distance to the closest centroid.
 *
 * The closest centroid is found first, as an integer index (its search compares
 * distances and is not differentiated, as lse's maximum), and the point's term is that
 * centroid's distance computed again: the same value, and the same derivative wherever it
 * exists (a point's term depends only on its closest centroid), so that the derivative
 * code works on n x d values instead of n x k x d. GradBench's manual tool uses the same
 * structure (the index of the closest centroid). The primal pays one more distance per
 * point (1/k of its work).
 */
#include "objectives.h"

double kmeans_cost(int n, int k, int d, const double *points, const double *centroids)
{
    double cost = 0.0;
    for (int i = 0; i < n; i++) {
        /* the index of the closest centroid, an integer: the search is not differentiated */
        int jmin = 0;
        double closest = 0.0;
        for (int j = 0; j < k; j++) {
            double dist = 0.0;
            for (int l = 0; l < d; l++) {
                double t = points[i * d + l] - centroids[j * d + l];
                dist += t * t;
            }
            if (j == 0 || dist < closest) {
                closest = dist;
                jmin = j;
            }
        }
        for (int l = 0; l < d; l++) {
            double t = points[i * d + l] - centroids[jmin * d + l];
            cost += t * t;
        }
    }
    return cost;
}
