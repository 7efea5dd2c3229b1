/* postal: the postal model of one link, fitted to a size sweep (Parmesan VII, "a p2p bandwidth
 * look-up table based on the postal model"): time(n) = latency + n / bandwidth.
 *
 * The fit minimises the RELATIVE squared error sum_i ((y_i - a - b x_i) / y_i)^2, so that a
 * 1 MiB copy counts as much as a 256 MiB one; ordinary least squares would let the largest
 * sizes alone decide the latency. Where the straight line is poor (small messages: launch and
 * protocol costs that do not scale with size) the line is fitted to the tail of the sweep only
 * and the measured points below it are kept as a look-up table, interpolated piecewise-linearly
 * in size, as Parmesan does. */
#ifndef PF_POSTAL_H
#define PF_POSTAL_H

#include <stddef.h>

#define PF_SWEEP_MAX 40 /* sizes in one sweep: 4 B .. 256 MiB by x2 is 27 */

typedef struct {
    double lat_ms;         /* fitted latency a, >= 0 */
    double gbps;           /* fitted bandwidth 1 / b, GB/s (1e9 bytes/s), > 0 */
    double fit_rel_rms;    /* sqrt(mean(((fit - measured) / measured)^2)) over the fitted
                            * points (the crossover and above) */
    double lat_floor_ms;   /* measured time of the smallest size: the latency a tiny message
                            * sees, which a fitted intercept can understate */
    double crossover_bytes;/* the table answers below this size, the fit at and above it;
                            * 0 = the whole sweep is one line, no table */
    int nlut;              /* table points: the measured sizes below the crossover + the first
                            * size at it, so interpolation up to the crossover has both ends */
    double lut_bytes[PF_SWEEP_MAX];
    double lut_ms[PF_SWEEP_MAX];
} pf_postal_t;

/* Default tolerance: a size is "well fitted" when |fit - measured| <= 10% of measured. */
#define PF_POSTAL_TOL 0.10

/* Fit n >= 2 points (bytes > 0, ms > 0, distinct sizes, any order). The crossover is the
 * smallest measured size k such that the fit of the sizes >= k keeps each of them within
 * rel_tol; the fit returned is that one. When no tail of 3 points (2 if n == 2) is straight, the
 * last 3 are fitted and the table covers the rest. A negative fitted latency is refitted through
 * the origin (latency 0). PF_EINPUT when the points are too few or invalid, or when time does not
 * grow with size (no bandwidth). */
int pf_postal_fit(const double *bytes, const double *ms, int n, double rel_tol, pf_postal_t *out,
                  char *err, size_t errlen);

/* Milliseconds to send `bytes` (>= 0): table below the crossover (clamped to its first point
 * below the smallest size), fit at and above. */
double pf_postal_ms(const pf_postal_t *p, double bytes);

#endif
