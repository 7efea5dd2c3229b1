#include "planner/sim/draw.h"
#include "planner/map/stage_graph.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void put_escaped(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            /* control characters are not allowed in XML 1.0 */
            fputc((unsigned char)*s < 0x20 && *s != '\t' ? '?' : *s, f);
        }
    }
}

static int finish(FILE *f, char *err, size_t errlen)
{
    if (fflush(f) != 0 || ferror(f))
        return pf_fail(err, errlen, PF_ERR, "could not write the picture");
    return PF_OK;
}

static void stage_colour(char *buf, size_t len, int s, int S)
{
    /* hues spread around the wheel, stepping by the golden angle so neighbours differ */
    double hue = fmod(s * 137.508, 360.0);
    (void)S;
    snprintf(buf, len, "hsl(%.0f,62%%,55%%)", hue);
}

/* A tick spacing of 1, 2 or 5 x 10^k giving about `want` ticks over `span`. */
static double tick_step(double span, int want)
{
    double raw = span / want, p = pow(10, floor(log10(raw)));
    return raw / p < 2 ? p : raw / p < 5 ? 2 * p : 5 * p;
}

/* ---- timeline ---- */

static const struct {
    const char *colour, *label;
} ev_style[] = {
    [PF_EV_FWD] = {"#4c78a8", "forward"},
    [PF_EV_BWD] = {"#f58518", "backward"},
    [PF_EV_TP] = {"#b279a2", "tensor-parallel collective"},
    [PF_EV_OPT] = {"#54a24b", "optimizer"},
    [PF_EV_SEND] = {"#72b7b2", "send"},
    [PF_EV_RECV] = {"#9ecae9", "receive"},
    [PF_EV_ALLREDUCE] = {"#e45756", "gradient all-reduce"},
};
#define NKINDS (int)(sizeof ev_style / sizeof ev_style[0])

int pf_draw_timeline_svg(const pf_sim_result_t *r, const pf_cluster_t *c, const char *title,
                         FILE *f, char *err, size_t errlen)
{
    const double left = 150, plot_w = 1000, top = 50, row_h = 30, comp_h = 15, comm_h = 8;
    double span = r->step_ms > 0 ? r->step_ms : 1, xs = plot_w / span;
    double height = top + r->ndevices * row_h + 70;
    int D = c ? pf_cluster_ndevices(c) : 0;
    int *row_of = calloc((size_t)(D > 0 ? D : 1), sizeof *row_of);
    if (!row_of)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    for (int i = 0; i < D; i++)
        row_of[i] = -1;
    for (int i = 0; i < r->ndevices; i++)
        if (r->device[i] >= 0 && r->device[i] < D)
            row_of[r->device[i]] = i;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n",
            left + plot_w + 30, height);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" "
               "y=\"20\" font-size=\"14\">", left);
    if (title)
        put_escaped(f, title);
    fprintf(f, "%sstep %.2f ms (%s, %d micro-batches, bubble %.0f%%)</text>\n", title ? ": " : "",
            r->step_ms, pf_training_schedule_name(r->schedule), r->microbatches,
            100 * r->bubble_fraction);

    for (int i = 0; i < r->ndevices; i++) {
        double y = top + i * row_h;
        int d = r->device[i], s = i / (r->replicas * r->tp);
        const char *name = c && d >= 0 && d < D ? pf_cluster_device(c, d)->name : NULL;
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", left - 6, y + comp_h - 3);
        if (name)
            put_escaped(f, name);
        else
            fprintf(f, "device %d", d);
        fprintf(f, " (stage %d)</text>\n", s);
        /* the idle background: whatever stays grey is a bubble */
        fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"#eeeeee\"/>\n",
                left, y, plot_w, comp_h);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"#f6f6f6\"/>\n",
                left, y + comp_h + 1, plot_w, comm_h);
    }
    for (int e = 0; e < r->nevents; e++) {
        const pf_sim_event_t *ev = &r->events[e];
        int row = -1;
        if (ev->device >= 0 && ev->device < D)
            row = row_of[ev->device];
        else
            for (int i = 0; i < r->ndevices && row < 0; i++)
                row = r->device[i] == ev->device ? i : -1;
        if (row < 0 || ev->kind < 0 || ev->kind >= NKINDS)
            continue;
        double y = top + row * row_h + (ev->stream == PF_STREAM_COMPUTE ? 0 : comp_h + 1);
        double h = ev->stream == PF_STREAM_COMPUTE ? comp_h : comm_h;
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" "
                   "stroke=\"white\" stroke-width=\"0.3\"><title>%s stage %d replica %d",
                left + ev->start_ms * xs, y, fmax((ev->end_ms - ev->start_ms) * xs, 0.3), h,
                ev_style[ev->kind].colour, ev_style[ev->kind].label, ev->stage, ev->replica);
        if (ev->microbatch >= 0)
            fprintf(f, " micro-batch %d", ev->microbatch);
        fprintf(f, ": %.3f-%.3f ms</title></rect>\n", ev->start_ms, ev->end_ms);
        if (ev->stream == PF_STREAM_COMPUTE && ev->microbatch >= 0 &&
            (ev->end_ms - ev->start_ms) * xs > 12)
            fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"white\" "
                       "font-size=\"9\">%d</text>\n",
                    left + (ev->start_ms + ev->end_ms) / 2 * xs, y + comp_h - 4, ev->microbatch);
    }
    /* time axis */
    double axis_y = top + r->ndevices * row_h + 5, dt = tick_step(span, 10);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"black\"/>\n", left,
            axis_y, left + plot_w, axis_y);
    for (double t = 0; t <= span * (1 + 1e-9); t += dt)
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"black\"/>"
                   "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                left + t * xs, axis_y, left + t * xs, axis_y + 4, left + t * xs, axis_y + 15, t);
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">ms</text>\n", left - 6,
            axis_y + 15);
    /* legend */
    double lx = left, ly = axis_y + 35;
    for (int k = 0; k <= NKINDS; k++) {
        const char *colour = k < NKINDS ? ev_style[k].colour : "#eeeeee";
        const char *label = k < NKINDS ? ev_style[k].label : "idle (bubble)";
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\" "
                   "stroke=\"#999\" stroke-width=\"0.5\"/><text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                lx, ly, colour, lx + 16, ly + 10, label);
        lx += 30 + 6.5 * strlen(label);
    }
    fputs("</svg>\n", f);
    free(row_of);
    return finish(f, err, errlen);
}

/* ---- mapping ---- */

int pf_draw_mapping_svg(const pf_plan_t *p, const pf_cluster_t *c, const pf_graph_t *g,
                        FILE *f, char *err, size_t errlen)
{
    if (!pf_plan_is_mapped(p))
        return pf_fail(err, errlen, PF_EINPUT,
                       "the plan's stages have no devices (map it first: planfarm map)");
    int D = pf_cluster_ndevices(c), S = p->stages, R = p->replicas;
    int nh = 0, rc = PF_ERR;
    int *stage_of = malloc((size_t)D * sizeof *stage_of);
    int *host_slot = malloc((size_t)D * sizeof *host_slot); /* device -> position in its host */
    int *host_idx = malloc((size_t)D * sizeof *host_idx);   /* device -> host box */
    int *host_id = malloc((size_t)D * sizeof *host_id), *host_n = calloc((size_t)D, sizeof(int));
    double *traffic = calloc((size_t)D * D, sizeof *traffic);
    pf_stage_graph_t *sg = NULL;
    if (!stage_of || !host_slot || !host_idx || !host_id || !host_n || !traffic)
        goto oom;
    if (g && !(sg = pf_stage_graph_from_plan(g, p)))
        goto oom;
    for (int d = 0; d < D; d++) {
        stage_of[d] = -1;
        int h = pf_cluster_device(c, d)->host, k = 0;
        while (k < nh && host_id[k] != h)
            k++;
        if (k == nh)
            host_id[nh++] = h;
        host_idx[d] = k;
        host_slot[d] = host_n[k]++;
    }
    int T = p->tensor_parallel > 0 ? p->tensor_parallel : 1, RT = R * T;
    for (int s = 0; s < S; s++)
        for (int i = 0; i < RT; i++) {
            int d = p->stage_list[s].devices[i];
            if (d < 0 || d >= D) {
                rc = pf_fail(err, errlen, PF_EINPUT, "stage_list[%d].devices[%d]: %d is not a "
                             "device of the cluster", s, i, d);
                goto done;
            }
            stage_of[d] = s;
        }
    /* traffic per step between device pairs (undirected), per tensor-parallel rank k: the
     * activation is replicated on a stage's T devices, so rank k of the next stage receives all
     * of it (B -> B resharding); the gradient ring of rank k reduces its 1/T of the weights */
    for (int s = 0; s < S; s++)
        for (int r = 0; r < R; r++)
            for (int k = 0; k < T; k++) {
                int a = p->stage_list[s].devices[r * T + k];
                for (int t = s + 1; t < S; t++) {
                    double w = sg ? 2.0 * p->microbatches * pf_stage_graph_msg_bytes(sg, s, t)
                                  : (t == s + 1);
                    int b = p->stage_list[t].devices[r * T + k];
                    traffic[(size_t)a * D + b] += w;
                    traffic[(size_t)b * D + a] += w;
                }
                if (R > 1) {
                    int b = p->stage_list[s].devices[((r + 1) % R) * T + k];
                    double w = sg ? pf_stage_graph_allreduce_bytes(sg, s) / T : 1;
                    traffic[(size_t)a * D + b] += w;
                    traffic[(size_t)b * D + a] += w;
                }
            }
    double wmax = 0;
    for (size_t i = 0; i < (size_t)D * D; i++)
        wmax = fmax(wmax, traffic[i]);

    int per = 1;
    for (int k = 0; k < nh; k++)
        per = host_n[k] > per ? host_n[k] : per;
    int dcols = (int)ceil(sqrt((double)per)), drows = (per + dcols - 1) / dcols;
    int hcols = (int)ceil(sqrt((double)nh));
    const double cell = 34, sq = 24, pad = 14, top = 40;
    double hw = dcols * cell + 2 * pad, hh = drows * cell + 2 * pad + 14;
    double width = hcols * (hw + 20) + 20;
    double height = top + ((nh + hcols - 1) / hcols) * (hh + 20) + 40 + 18 * ((S + 5) / 6);
#define DEV_X(d) (20 + (host_idx[d] % hcols) * (hw + 20) + pad + (host_slot[d] % dcols) * cell + sq / 2)
#define DEV_Y(d) (top + (host_idx[d] / hcols) * (hh + 20) + pad + 14 + (host_slot[d] / dcols) * cell + sq / 2)

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"20\" y=\"22\" font-size=\"14\">",
            fmax(width, 720), height);
    put_escaped(f, p->model ? p->model : "plan");
    fputs(" on ", f);
    put_escaped(f, pf_cluster_name(c));
    fprintf(f, ": %d stages x %d replicas x %d tensor-parallel; line width = %s per step"
               "</text>\n", S, R, T, sg ? "bytes exchanged" : "links used");
    for (int k = 0; k < nh; k++) {
        double x = 20 + (k % hcols) * (hw + 20), y = top + (k / hcols) * (hh + 20);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" rx=\"6\" "
                   "fill=\"#fafafa\" stroke=\"#555\"/><text x=\"%.0f\" y=\"%.0f\">host %d</text>\n",
                x, y, hw, hh, x + 6, y + 14, host_id[k]);
    }
    for (int a = 0; a < D; a++)
        for (int b = a + 1; b < D; b++) {
            double w = traffic[(size_t)a * D + b];
            if (w <= 0)
                continue;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" "
                       "stroke-opacity=\"0.45\" stroke-width=\"%.2f\"><title>",
                    DEV_X(a), DEV_Y(a), DEV_X(b), DEV_Y(b), 0.5 + 7.5 * w / wmax);
            char buf[32];
            pf_fmt_bytes(buf, sizeof buf, w);
            fprintf(f, "devices %d-%d: %s</title></line>\n", a, b, sg ? buf : "used");
        }
    for (int d = 0; d < D; d++) {
        char colour[32] = "#dddddd";
        if (stage_of[d] >= 0)
            stage_colour(colour, sizeof colour, stage_of[d], S);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"%s\" "
                   "stroke=\"#222\"><title>",
                DEV_X(d) - sq / 2, DEV_Y(d) - sq / 2, sq, sq, colour);
        put_escaped(f, pf_cluster_device(c, d)->name);
        if (stage_of[d] >= 0)
            fprintf(f, ": stage %d", stage_of[d]);
        fprintf(f, "</title></rect>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                   "font-size=\"9\">%s%d</text>\n",
                DEV_X(d), DEV_Y(d) + 3, stage_of[d] >= 0 ? "s" : "", stage_of[d] >= 0 ? stage_of[d] : d);
    }
    double ly = top + ((nh + hcols - 1) / hcols) * (hh + 20) + 10;
    for (int s = 0; s < S; s++) {
        char colour[32];
        stage_colour(colour, sizeof colour, s, S);
        double x = 20 + (s % 6) * 70, y = ly + (s / 6) * 18;
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.0f\">stage %d</text>\n",
                x, y, colour, x + 16, y + 10, s);
    }
    fputs("</svg>\n", f);
#undef DEV_X
#undef DEV_Y
    rc = finish(f, err, errlen);
    goto done;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "out of memory");
done:
    pf_stage_graph_destroy(&sg);
    free(stage_of);
    free(host_slot);
    free(host_idx);
    free(host_id);
    free(host_n);
    free(traffic);
    return rc;
}
