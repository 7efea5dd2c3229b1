#include "planner/inputs/postal.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double x, y;
} point_t;

static int cmp_point(const void *a, const void *b)
{
    double d = ((const point_t *)a)->x - ((const point_t *)b)->x;
    return (d > 0) - (d < 0);
}

/* Weighted least squares of y = a + b x with weights w_i = 1 / y_i^2 (relative error): the 2x2
 * normal equations [S, Sx; Sx, Sxx] [a; b] = [Sy; Sxy] with S = sum w, Sx = sum w x, ... */
static void fit_line(const point_t *p, int n, double *a, double *b)
{
    double s = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        double w = 1.0 / (p[i].y * p[i].y);
        s += w;
        sx += w * p[i].x;
        sy += w * p[i].y;
        sxx += w * p[i].x * p[i].x;
        sxy += w * p[i].x * p[i].y;
    }
    double det = s * sxx - sx * sx;
    *a = (sy * sxx - sx * sxy) / det;
    *b = (s * sxy - sx * sy) / det;
    if (*a < 0) { /* through the origin: minimise sum w (y - b x)^2 */
        *a = 0;
        *b = sxy / sxx;
    }
}

int pf_postal_fit(const double *bytes, const double *ms, int n, double rel_tol, pf_postal_t *out,
                  char *err, size_t errlen)
{
    point_t p[PF_SWEEP_MAX];
    memset(out, 0, sizeof *out);
    if (n < 2 || n > PF_SWEEP_MAX)
        return pf_fail(err, errlen, PF_EINPUT, "postal fit: %d sizes (need 2..%d)", n,
                       PF_SWEEP_MAX);
    if (!(rel_tol > 0))
        return pf_fail(err, errlen, PF_EINPUT, "postal fit: tolerance must be positive");
    for (int i = 0; i < n; i++) {
        if (!(bytes[i] > 0) || !isfinite(bytes[i]) || !(ms[i] > 0) || !isfinite(ms[i]))
            return pf_fail(err, errlen, PF_EINPUT,
                           "postal fit: point %d (%g bytes, %g ms): sizes and times must be "
                           "positive and finite", i, bytes[i], ms[i]);
        p[i] = (point_t){bytes[i], ms[i]};
    }
    qsort(p, (size_t)n, sizeof *p, cmp_point);
    for (int i = 1; i < n; i++)
        if (p[i].x == p[i - 1].x)
            return pf_fail(err, errlen, PF_EINPUT, "postal fit: size %g bytes given twice",
                           p[i].x);
    /* The crossover is the smallest size k from which the sweep's tail is a straight line: the
     * fit of points k..n-1 keeps every one of them within rel_tol. Small messages (launch and
     * protocol costs) would otherwise bend the line and cost the large ones their bandwidth. */
    int min_tail = n >= 3 ? 3 : 2, k;
    double a = 0, b = 0, sq = 0;
    for (k = 0; k <= n - min_tail; k++) {
        int ok = 1;
        fit_line(p + k, n - k, &a, &b);
        sq = 0;
        for (int i = k; i < n; i++) {
            double rel = (a + b * p[i].x - p[i].y) / p[i].y;
            sq += rel * rel;
            ok &= fabs(rel) <= rel_tol;
        }
        if (ok)
            break;
    }
    if (k > n - min_tail) { /* no straight tail: the last points decide, the table the rest */
        k = n - min_tail;
        fit_line(p + k, n - k, &a, &b);
        sq = 0;
        for (int i = k; i < n; i++)
            sq += pow((a + b * p[i].x - p[i].y) / p[i].y, 2);
    }
    if (!(b > 0) || !isfinite(b))
        return pf_fail(err, errlen, PF_EINPUT,
                       "postal fit: time does not grow with size (%g .. %g bytes): no bandwidth",
                       p[k].x, p[n - 1].x);
    out->lat_ms = a;
    out->gbps = 1.0 / (b * 1e6); /* b is ms per byte; 1 GB/s = 1e6 bytes per ms */
    out->fit_rel_rms = sqrt(sq / (n - k));
    out->lat_floor_ms = p[0].y;
    /* The table keeps the points below the crossover and the crossover point itself, so that
     * interpolation just below the crossover meets the measured time there. */
    out->crossover_bytes = k > 0 ? p[k].x : 0;
    out->nlut = k > 0 ? k + 1 : 0;
    for (int i = 0; i < out->nlut; i++) {
        out->lut_bytes[i] = p[i].x;
        out->lut_ms[i] = p[i].y;
    }
    return PF_OK;
}

double pf_postal_ms(const pf_postal_t *p, double bytes)
{
    if (p->nlut > 0 && bytes < p->crossover_bytes) {
        if (bytes <= p->lut_bytes[0])
            return p->lut_ms[0];
        for (int i = 1; i < p->nlut; i++) {
            if (bytes <= p->lut_bytes[i]) {
                double x0 = p->lut_bytes[i - 1], x1 = p->lut_bytes[i];
                double t = (bytes - x0) / (x1 - x0);
                return p->lut_ms[i - 1] + t * (p->lut_ms[i] - p->lut_ms[i - 1]);
            }
        }
    }
    return p->lat_ms + bytes / (p->gbps * 1e6);
}
