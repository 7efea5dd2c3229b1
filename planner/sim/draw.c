#include "planner/sim/draw.h"
#include "planner/map/stage_graph.h"
#include "planner/ir/cost.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdbool.h>
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

/* Geometry of the timeline: one row per device, a compute lane over a communication lane. */
typedef struct {
    double left, plot_w, top, row_h, comp_h, comm_h;
    double span, xs; /* ms drawn, pixels per ms */
} timeline_geom_t;

static int event_row(const pf_simulate_result_t *r, const int *row_of, int D, int device);

/* Each row's stage: that of its device's first forward or backward (the stages of a plan whose
 * stages differ have rows of different counts), else the row's place among S x R x T rows. */
static void row_stages(const pf_simulate_result_t *r, const int *row_of, int D, int *stage)
{
    for (int i = 0; i < r->ndevices; i++)
        stage[i] = -1;
    for (int e = 0; e < r->nevents; e++) {
        const pf_simulate_event_t *ev = &r->events[e];
        int row = event_row(r, row_of, D, ev->device);
        if (row >= 0 && stage[row] < 0 && (ev->kind == PF_EV_FWD || ev->kind == PF_EV_BWD))
            stage[row] = ev->stage;
    }
    for (int i = 0; i < r->ndevices; i++)
        if (stage[i] < 0)
            stage[i] = i / (r->replicas * r->tp);
}

static void timeline_rows(const pf_simulate_result_t *r, const pf_cluster_t *c, int D,
                          const int *stage, const timeline_geom_t *g, FILE *f)
{
    for (int i = 0; i < r->ndevices; i++) {
        double y = g->top + i * g->row_h;
        int d = r->device[i], s = stage[i];
        const char *name = c && d >= 0 && d < D ? pf_cluster_device(c, d)->name : NULL;
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", g->left - 6,
                y + g->comp_h - 3);
        if (name)
            put_escaped(f, name);
        else
            fprintf(f, "device %d", d);
        fprintf(f, " (stage %d)</text>\n", s);
        /* the idle background: whatever stays grey is a bubble */
        fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"#eeeeee\"/>\n",
                g->left, y, g->plot_w, g->comp_h);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"#f6f6f6\"/>\n",
                g->left, y + g->comp_h + 1, g->plot_w, g->comm_h);
    }
}

/* The row of an event's device: row_of for a device of the cluster, else a search of the
 * result's devices; -1 when it has none. */
static int event_row(const pf_simulate_result_t *r, const int *row_of, int D, int device)
{
    int row = -1;
    if (device >= 0 && device < D)
        row = row_of[device];
    else
        for (int i = 0; i < r->ndevices && row < 0; i++)
            row = r->device[i] == device ? i : -1;
    return row;
}

static void timeline_events(const pf_simulate_result_t *r, const int *row_of, int D,
                            const timeline_geom_t *g, FILE *f)
{
    for (int e = 0; e < r->nevents; e++) {
        const pf_simulate_event_t *ev = &r->events[e];
        int row = event_row(r, row_of, D, ev->device);
        if (row < 0 || ev->kind < 0 || ev->kind >= NKINDS)
            continue;
        double y = g->top + row * g->row_h + (ev->stream == PF_STREAM_COMPUTE ? 0 : g->comp_h + 1);
        double h = ev->stream == PF_STREAM_COMPUTE ? g->comp_h : g->comm_h;
        if (ev->kind == PF_EV_SEND || ev->kind == PF_EV_RECV) { /* at once: one half each */
            h /= 2;
            y += ev->kind == PF_EV_RECV ? h : 0;
        }
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" "
                   "stroke=\"white\" stroke-width=\"0.3\"><title>%s stage %d replica %d",
                g->left + ev->start_ms * g->xs, y, fmax((ev->end_ms - ev->start_ms) * g->xs, 0.3),
                h, ev_style[ev->kind].colour, ev_style[ev->kind].label, ev->stage, ev->replica);
        if (ev->microbatch >= 0)
            fprintf(f, " micro-batch %d", ev->microbatch);
        fprintf(f, ": %.3f-%.3f ms</title></rect>\n", ev->start_ms, ev->end_ms);
        if (ev->stream == PF_STREAM_COMPUTE && ev->microbatch >= 0 &&
            (ev->end_ms - ev->start_ms) * g->xs > 12)
            fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"white\" "
                       "font-size=\"9\">%d</text>\n",
                    g->left + (ev->start_ms + ev->end_ms) / 2 * g->xs, y + g->comp_h - 4,
                    ev->microbatch);
    }
}

/* The time axis below the rows and the legend below it. */
static void timeline_axis_and_legend(const pf_simulate_result_t *r, const timeline_geom_t *g,
                                     FILE *f)
{
    double left = g->left, xs = g->xs, span = g->span;
    double axis_y = g->top + r->ndevices * g->row_h + 5, dt = tick_step(span, 10);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"black\"/>\n", left,
            axis_y, left + g->plot_w, axis_y);
    for (double t = 0; t <= span * (1 + 1e-9); t += dt)
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"black\"/>"
                   "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                left + t * xs, axis_y, left + t * xs, axis_y + 4, left + t * xs, axis_y + 15, t);
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">ms</text>\n", left - 6,
            axis_y + 15);
    double lx = left, ly = axis_y + 35;
    for (int k = 0; k <= NKINDS; k++) {
        const char *colour = k < NKINDS ? ev_style[k].colour : "#eeeeee";
        const char *label = k < NKINDS ? ev_style[k].label : "idle (bubble)";
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\" "
                   "stroke=\"#999\" stroke-width=\"0.5\"/><text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                lx, ly, colour, lx + 16, ly + 10, label);
        lx += 30 + 6.5 * strlen(label);
    }
}

int pf_draw_timeline_svg(const pf_simulate_result_t *r, const pf_cluster_t *c, const char *title,
                         FILE *f, char *err, size_t errlen)
{
    timeline_geom_t g = {.left = 150, .plot_w = 1000, .top = 50, .row_h = 30, .comp_h = 15,
                         .comm_h = 8};
    g.span = r->step_ms > 0 ? r->step_ms : 1;
    g.xs = g.plot_w / g.span;
    double height = g.top + r->ndevices * g.row_h + 70;
    int D = c ? pf_cluster_ndevices(c) : 0;
    int *row_of = calloc((size_t)(D > 0 ? D : 1), sizeof *row_of);
    int *stage = malloc((size_t)(r->ndevices > 0 ? r->ndevices : 1) * sizeof *stage);
    if (!row_of || !stage) {
        free(row_of);
        free(stage);
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    }
    for (int i = 0; i < D; i++)
        row_of[i] = -1;
    for (int i = 0; i < r->ndevices; i++)
        if (r->device[i] >= 0 && r->device[i] < D)
            row_of[r->device[i]] = i;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n",
            g.left + g.plot_w + 30, height);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" "
               "y=\"20\" font-size=\"14\">", g.left);
    if (title)
        put_escaped(f, title);
    fprintf(f, "%sstep %.2f ms (%s, %d micro-batches, bubble %.0f%%)</text>\n", title ? ": " : "",
            r->step_ms, pf_training_schedule_name(r->schedule), r->microbatches,
            100 * r->bubble_fraction);
    row_stages(r, row_of, D, stage);
    timeline_rows(r, c, D, stage, &g, f);
    timeline_events(r, row_of, D, &g, f);
    timeline_axis_and_legend(r, &g, f);
    fputs("</svg>\n", f);
    free(row_of);
    free(stage);
    return finish(f, err, errlen);
}

/* ---- mapping ---- */

/* Where the mapping drawing puts things: hosts as boxes in a grid of hcols, each device in a
 * grid of dcols inside its host's box. */
typedef struct {
    int D, nh, hcols, dcols;
    int *stage_of;  /* device -> stage, -1 */
    int *slot_of;   /* device -> its index in its stage's devices (replica x t_s + rank) */
    int *host_slot; /* device -> position in its host */
    int *host_idx;  /* device -> host box */
    int *host_id;   /* box -> host */
    int *host_n;    /* box -> devices */
    double *traffic; /* D x D */
    double cell, sq, pad, top, hw, hh;
} map_layout_t;

static double dev_x(const map_layout_t *L, int d)
{
    return 20 + (L->host_idx[d] % L->hcols) * (L->hw + 20) + L->pad +
           (L->host_slot[d] % L->dcols) * L->cell + L->sq / 2;
}

static double dev_y(const map_layout_t *L, int d)
{
    return L->top + (L->host_idx[d] / L->hcols) * (L->hh + 20) + L->pad + 14 +
           (L->host_slot[d] / L->dcols) * L->cell + L->sq / 2;
}

/* Host boxes in order of first device; each device's box and slot. */
static void layout_hosts(map_layout_t *L, const pf_cluster_t *c)
{
    for (int d = 0; d < L->D; d++) {
        L->stage_of[d] = -1;
        int h = pf_cluster_device(c, d)->host, k = 0;
        while (k < L->nh && L->host_id[k] != h)
            k++;
        if (k == L->nh)
            L->host_id[L->nh++] = h;
        L->host_idx[d] = k;
        L->host_slot[d] = L->host_n[k]++;
    }
}

/* Each stage's d_s x t_s devices (plan_degrees: the plan's R x T where the stages agree). */
static int layout_stages(map_layout_t *L, const pf_plan_t *p, char *err, size_t errlen)
{
    for (int s = 0; s < p->stages; s++)
        for (int i = 0; i < pf_plan_degrees_ndevices(p, s); i++) {
            int d = p->stage_list[s].devices[i];
            if (d < 0 || d >= L->D)
                return pf_fail(err, errlen, PF_EINPUT, "stage_list[%d].devices[%d]: %d is not a "
                               "device of the cluster", s, i, d);
            L->stage_of[d] = s;
            L->slot_of[d] = i;
        }
    return PF_OK;
}

static void add_link(map_layout_t *L, int a, int b, double w)
{
    L->traffic[(size_t)a * L->D + b] += w;
    L->traffic[(size_t)b * L->D + a] += w;
}

/* Stage s's replica r to stage u's replicas it exchanges micro-batches with (r' = r mod
 * pf_gcd(d_s, d_u): N / lcm(d_s, d_u) micro-batches each, forward and backward), rank k to rank k
 * of the larger group (map_stages.h's xfer); one replica of each where the stages agree. */
static void layout_p2p(map_layout_t *L, const pf_plan_t *p, const pf_stage_graph_t *sg, int s,
                       int r, int u)
{
    int ds = pf_plan_degrees_replicas(p, s), du = pf_plan_degrees_replicas(p, u);
    int ts = pf_plan_degrees_tp(p, s), tu = pf_plan_degrees_tp(p, u), g = pf_gcd(ds, du);
    double n = (double)pf_plan_degrees_step_microbatches(p) / ((double)ds / g * du);
    double w = sg ? 2.0 * n * pf_stage_graph_msg_bytes(sg, s, u) : (u == s + 1);
    for (int q = r % g; q < du; q += g)
        for (int k = 0; k < (ts > tu ? ts : tu); k++)
            add_link(L, p->stage_list[s].devices[r * ts + k % ts],
                     p->stage_list[u].devices[q * tu + k % tu], w);
}

/* Traffic per step between device pairs (undirected), per tensor-parallel rank k: the activation
 * is replicated on a stage's t_s devices, so rank k of the next stage receives all of it (B -> B
 * resharding); the gradient ring of rank k over the stage's d_s replicas reduces its 1/t_s of
 * the weights. Without a graph (sg NULL), 1 per link used. Returns the largest entry. */
static double layout_traffic(map_layout_t *L, const pf_plan_t *p, const pf_stage_graph_t *sg)
{
    int S = p->stages, D = L->D;
    for (int s = 0; s < S; s++) {
        int R = pf_plan_degrees_replicas(p, s), T = pf_plan_degrees_tp(p, s);
        for (int r = 0; r < R; r++) {
            for (int u = s + 1; u < S; u++)
                layout_p2p(L, p, sg, s, r, u);
            for (int k = 0; k < T && R > 1; k++) {
                double w = sg ? pf_cost_ring_allreduce_bytes(pf_stage_graph_param_bytes(sg, s), R) / T
                              : 1;
                add_link(L, p->stage_list[s].devices[r * T + k],
                         p->stage_list[s].devices[((r + 1) % R) * T + k], w);
            }
        }
    }
    double *traffic = L->traffic, wmax = 0;
    for (size_t i = 0; i < (size_t)D * D; i++)
        wmax = fmax(wmax, traffic[i]);
    return wmax;
}

static void draw_host_boxes(const map_layout_t *L, FILE *f)
{
    for (int k = 0; k < L->nh; k++) {
        double x = 20 + (k % L->hcols) * (L->hw + 20), y = L->top + (k / L->hcols) * (L->hh + 20);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" rx=\"6\" "
                   "fill=\"#fafafa\" stroke=\"#555\"/><text x=\"%.0f\" y=\"%.0f\">host %d</text>\n",
                x, y, L->hw, L->hh, x + 6, y + 14, L->host_id[k]);
    }
}

static void draw_links(const map_layout_t *L, double wmax, bool bytes, FILE *f)
{
    for (int a = 0; a < L->D; a++)
        for (int b = a + 1; b < L->D; b++) {
            double w = L->traffic[(size_t)a * L->D + b];
            if (w <= 0)
                continue;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" "
                       "stroke-opacity=\"0.45\" stroke-width=\"%.2f\"><title>",
                    dev_x(L, a), dev_y(L, a), dev_x(L, b), dev_y(L, b), 0.5 + 7.5 * w / wmax);
            char buf[32];
            pf_fmt_bytes(buf, sizeof buf, w);
            fprintf(f, "devices %d-%d: %s</title></line>\n", a, b, bytes ? buf : "used");
        }
}

static void draw_devices(const map_layout_t *L, const pf_cluster_t *c, const pf_plan_t *p,
                         FILE *f)
{
    int S = p->stages;
    for (int d = 0; d < L->D; d++) {
        char colour[32] = "#dddddd";
        int st = L->stage_of[d];
        if (st >= 0)
            stage_colour(colour, sizeof colour, st, S);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"%s\" "
                   "stroke=\"#222\"><title>",
                dev_x(L, d) - L->sq / 2, dev_y(L, d) - L->sq / 2, L->sq, L->sq, colour);
        put_escaped(f, pf_cluster_device(c, d)->name);
        if (st >= 0) /* replica r's t_s devices at [r t_s, r t_s + t_s) */
            fprintf(f, ": stage %d replica %d rank %d", st,
                    L->slot_of[d] / pf_plan_degrees_tp(p, st),
                    L->slot_of[d] % pf_plan_degrees_tp(p, st));
        fprintf(f, "</title></rect>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                   "font-size=\"9\">%s%d</text>\n",
                dev_x(L, d), dev_y(L, d) + 3, st >= 0 ? "s" : "", st >= 0 ? st : d);
    }
}

/* One entry per stage; a plan whose stages differ says each stage's d_s x t_s. */
static void draw_stage_legend(const map_layout_t *L, const pf_plan_t *p, FILE *f)
{
    int S = p->stages, mixed = pf_plan_degrees_mixed(p), w = mixed ? 110 : 70;
    double ly = L->top + ((L->nh + L->hcols - 1) / L->hcols) * (L->hh + 20) + 10;
    for (int s = 0; s < S; s++) {
        char colour[32];
        stage_colour(colour, sizeof colour, s, S);
        double x = 20 + (s % 6) * w, y = ly + (s / 6) * 18;
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.0f\">stage %d",
                x, y, colour, x + 16, y + 10, s);
        if (mixed)
            fprintf(f, " (%d x %d)", pf_plan_degrees_replicas(p, s), pf_plan_degrees_tp(p, s));
        fputs("</text>\n", f);
    }
}

/* The grid of host boxes and of devices inside them, and the picture's size. */
static void layout_grid(map_layout_t *L, int S, double *width, double *height)
{
    int per = 1;
    for (int k = 0; k < L->nh; k++)
        per = L->host_n[k] > per ? L->host_n[k] : per;
    L->dcols = (int)ceil(sqrt((double)per));
    int drows = (per + L->dcols - 1) / L->dcols;
    L->hcols = (int)ceil(sqrt((double)L->nh));
    L->cell = 34;
    L->sq = 24;
    L->pad = 14;
    L->top = 40;
    L->hw = L->dcols * L->cell + 2 * L->pad;
    L->hh = drows * L->cell + 2 * L->pad + 14;
    *width = L->hcols * (L->hw + 20) + 20;
    *height = L->top + ((L->nh + L->hcols - 1) / L->hcols) * (L->hh + 20) + 40 + 18 * ((S + 5) / 6);
}

int pf_draw_mapping_svg(const pf_plan_t *p, const pf_cluster_t *c, const pf_graph_t *g,
                        FILE *f, char *err, size_t errlen)
{
    if (!pf_plan_is_mapped(p))
        return pf_fail(err, errlen, PF_EINPUT,
                       "the plan's stages have no devices (map it first: planfarm map)");
    int D = pf_cluster_ndevices(c), S = p->stages, R = p->replicas, rc = PF_ERR;
    map_layout_t L = {.D = D};
    L.stage_of = malloc((size_t)D * sizeof *L.stage_of);
    L.slot_of = malloc((size_t)D * sizeof *L.slot_of);
    L.host_slot = malloc((size_t)D * sizeof *L.host_slot);
    L.host_idx = malloc((size_t)D * sizeof *L.host_idx);
    L.host_id = malloc((size_t)D * sizeof *L.host_id);
    L.host_n = calloc((size_t)D, sizeof(int));
    L.traffic = calloc((size_t)D * D, sizeof *L.traffic);
    pf_stage_graph_t *sg = NULL;
    if (!L.stage_of || !L.slot_of || !L.host_slot || !L.host_idx || !L.host_id || !L.host_n || !L.traffic)
        goto oom;
    if (g && !(sg = pf_stage_graph_from_plan(g, p)))
        goto oom;
    layout_hosts(&L, c);
    int T = p->tensor_parallel > 0 ? p->tensor_parallel : 1;
    if ((rc = layout_stages(&L, p, err, errlen)) != PF_OK)
        goto done;
    double wmax = layout_traffic(&L, p, sg), width, height;
    layout_grid(&L, S, &width, &height);

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"20\" y=\"22\" font-size=\"14\">",
            fmax(width, 720), height);
    put_escaped(f, p->model ? p->model : "plan");
    fputs(" on ", f);
    put_escaped(f, pf_cluster_name(c));
    if (pf_plan_degrees_mixed(p)) {
        char deg[512];
        pf_plan_degrees_describe(p, deg, sizeof deg);
        fprintf(f, ": %d stages of replicas x tensor-parallel ", S);
        put_escaped(f, deg);
    } else {
        fprintf(f, ": %d stages x %d replicas x %d tensor-parallel", S, R, T);
    }
    fprintf(f, "; line width = %s per step</text>\n", sg ? "bytes exchanged" : "links used");
    draw_host_boxes(&L, f);
    draw_links(&L, wmax, sg != NULL, f);
    draw_devices(&L, c, p, f);
    draw_stage_legend(&L, p, f);
    fputs("</svg>\n", f);
    rc = finish(f, err, errlen);
    goto done;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "out of memory");
done:
    pf_stage_graph_destroy(&sg);
    free(L.stage_of);
    free(L.slot_of);
    free(L.host_slot);
    free(L.host_idx);
    free(L.host_id);
    free(L.host_n);
    free(L.traffic);
    return rc;
}
