/*
 * GradBench's kmeans eval (cpp/gradbench/evals/kmeans.hpp): the k-means cost, the sum
 * over the points of the squared distance to the closest centroid.
 */
#include "objectives.h"

double kmeans_cost(int n, int k, int d, const double *points, const double *centroids)
{
    double cost = 0.0;
    for (int i = 0; i < n; i++) {
        double closest = 0.0;
        for (int j = 0; j < k; j++) {
            double dist = 0.0;
            for (int l = 0; l < d; l++) {
                double t = points[i * d + l] - centroids[j * d + l];
                dist += t * t;
            }
            if (j == 0 || dist < closest)
                closest = dist;
        }
        cost += closest;
    }
    return cost;
}
