/* Plots with PLplot (lab/plot.h).
 *
 * PLplot keeps one global state and calls exit() on some errors (plexit): every
 * plot runs inside run_plot, which checks what it can beforehand (the device is
 * installed, the file can be created), replaces PLplot's exit handler by one that
 * jumps back to run_plot, and its abort handler (recoverable errors) by one that
 * records the message. Arrays are prepared before the plot starts so that such a
 * jump leaks nothing of ours.
 */
#include "lab/plot.h"

#include <errno.h>
#include <math.h>
#include <plplot.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/output.h"

enum { PAGE_WIDTH = 1000, PAGE_HEIGHT = 600, MAX_IMAGE_SIDE = 1000, N_SERIES_COLOURS = 10 };

/* cmap0 entries: background, foreground, grid, annotation, then the series colours. */
enum { COL_BG = 0, COL_FG = 1, COL_GRID = 2, COL_MARK = 3, COL_SERIES = 4 };

static char last_path[4096];

/* ---- PLplot error handling ---- */

static jmp_buf *pl_jump;   /* where a fatal PLplot error returns to (NULL outside a plot) */
static char pl_message[512];
static int pl_aborted;

static int on_plexit(const char *message)
{
    snprintf(pl_message, sizeof pl_message, "%s", message ? message : "");
    if (pl_jump)
        longjmp(*pl_jump, 1);
    return 1; /* outside a plot PLplot exits, as it would by default */
}

static void on_plabort(const char *message)
{
    if (!pl_aborted)
        snprintf(pl_message, sizeof pl_message, "%s", message ? message : "");
    pl_aborted = 1;
}

/* ---- devices ---- */

/* Whether PLplot has device `name`. The list is copied once: PLplot frees its own
 * at every plend. */
static int device_installed(const char *name)
{
    enum { MAX_DEVICES = 128, NAME_SIZE = 32 };
    static char names[MAX_DEVICES][NAME_SIZE];
    static int count = -1;
    if (count < 0) {
        const char *menu[MAX_DEVICES], *found[MAX_DEVICES];
        const char **pm = menu, **pn = found;
        int n = MAX_DEVICES;
        plgDevs(&pm, &pn, &n);
        for (int i = 0; i < n; i++)
            snprintf(names[i], NAME_SIZE, "%s", found[i] ? found[i] : "");
        count = n;
    }
    for (int i = 0; i < count; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

static const char *const preferred[] = {"pngcairo", "pngqt", "svg"};
static const char *chosen_device; /* lb_plot_use_device's, or NULL */

lb_status lb_plot_use_device(const char *device)
{
    if (!device) {
        chosen_device = NULL;
        return LB_OK;
    }
    for (int i = 0; i < 3; i++)
        if (strcmp(device, preferred[i]) == 0) {
            if (!device_installed(device))
                return lb_error(LB_ERR_IO, "PLplot has no %s device on this machine", device);
            chosen_device = preferred[i];
            return LB_OK;
        }
    return lb_error(LB_ERR_VALUE, "plot device %s is not one of pngcairo, pngqt, svg", device);
}

const char *lb_plot_device(void)
{
    if (chosen_device)
        return chosen_device;
    const char *forced = getenv("LOOKBACK_PLOT_DEVICE");
    if (forced && *forced) {
        for (int i = 0; i < 3; i++) {
            if (strcmp(forced, preferred[i]) != 0)
                continue;
            if (device_installed(forced))
                return preferred[i];
            lb_error(LB_ERR_IO, "LOOKBACK_PLOT_DEVICE=%s: PLplot has no such device on this machine (pngcairo is in "
                                "the package plplot-driver-cairo, pngqt in plplot-driver-qt)", forced);
            return NULL;
        }
        lb_error(LB_ERR_VALUE, "LOOKBACK_PLOT_DEVICE=%s is not one of pngcairo, pngqt, svg", forced);
        return NULL;
    }
    for (int i = 0; i < 3; i++)
        if (device_installed(preferred[i]))
            return preferred[i];
    lb_error(LB_ERR_IO, "PLplot has none of the devices pngcairo, pngqt, svg (install plplot-driver-cairo)");
    return NULL;
}

const char *lb_plot_last_path(void) { return last_path; }

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The file a device writes for a requested path: the path itself, or for svg the
 * path with ".png" replaced by (or ".svg" appended). */
static lb_status target_path(const char *requested, const char *device, char *out, size_t size)
{
    int n;
    if (strcmp(device, "svg") != 0 || ends_with(requested, ".svg"))
        n = snprintf(out, size, "%s", requested);
    else if (ends_with(requested, ".png"))
        n = snprintf(out, size, "%.*s.svg", (int)(strlen(requested) - 4), requested);
    else
        n = snprintf(out, size, "%s.svg", requested);
    if (n < 0 || (size_t)n >= size)
        return lb_error(LB_ERR_VALUE, "the path is too long: %s", requested);
    return LB_OK;
}

/* Checks that a written file is a complete PNG or SVG. */
static lb_status check_output(const char *path, const char *device)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return lb_error(LB_ERR_IO, "PLplot wrote no file (%s)", lb_system_error(errno));
    unsigned char head[512];
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    if (strcmp(device, "svg") == 0) {
        if (n == 0 || !strstr((const char *)head, "<svg"))
            return lb_error(LB_ERR_IO, "PLplot's svg output is empty or not SVG");
    } else if (n < 8 || memcmp(head, "\x89PNG\r\n\x1a\n", 8) != 0) {
        return lb_error(LB_ERR_IO, "PLplot's %s output is empty or not a PNG file", device);
    }
    return LB_OK;
}

static void set_colours(void)
{
    /* White background, black text, light grid, a red annotation colour, then the ten
     * colours of matplotlib's "tab10" cycle for the series. */
    static const PLINT r[] = {255, 0, 225, 200, 31, 255, 44, 214, 148, 140, 227, 127, 188, 23};
    static const PLINT g[] = {255, 0, 225, 0, 119, 127, 160, 39, 103, 86, 119, 127, 189, 190};
    static const PLINT b[] = {255, 0, 225, 0, 180, 14, 44, 40, 189, 75, 194, 127, 34, 207};
    plscmap0(r, g, b, (PLINT)(sizeof r / sizeof r[0]));
}

typedef void (*draw_fn)(const void *ctx);

enum { PLOT_MEMORY_BYTES = 128 << 20 };

/* 1 when PLOT_MEMORY_BYTES of address space can be mapped now (ulimit -v), 0 if not. */
static int plot_memory_free(void)
{
    void *p = mmap(NULL, PLOT_MEMORY_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    munmap(p, PLOT_MEMORY_BYTES);
    return 1;
}

/* Draws one page with `draw` into the file for `requested` (see the header). */
static lb_status run_plot(const char *what, const char *requested, draw_fn draw, const void *ctx)
{
    if (!requested || !*requested)
        return lb_error(LB_ERR_VALUE, "%s: the output path is empty", what);
    const char *device = lb_plot_device();
    if (!device)
        return lb_error_context("%s", what);
    static char target[4096], temp[4200];
    if (target_path(requested, device, target, sizeof target) != LB_OK)
        return lb_error_context("%s", what);
    if (lb_output_check(target, what) != LB_OK)
        return lb_last_status();
    int replace = lb_output_present(target);
    /* PLplot looks for a folder for its temporary files in the current directory among
     * others and exits the process when that directory no longer exists. */
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd) && errno == ENOENT)
        return lb_error(LB_ERR_IO, "%s: cannot draw %s: the current directory no longer exists (it was removed while "
                        "this command ran; PLplot needs it)", what, target);
    /* The drawing libraries (cairo, pango, GLib) abort the process when memory runs out. */
    if (!plot_memory_free())
        return lb_error(LB_ERR_MEMORY, "out of memory (while drawing %s: the plotting libraries need about %d MB of "
                        "address space; ulimit -v leaves less)", target, PLOT_MEMORY_BYTES >> 20);
    snprintf(temp, sizeof temp, "%s.XXXXXX", target);
    int fd = mkstemp(temp);
    if (fd < 0)
        return lb_error(LB_ERR_IO, "%s: cannot create a file next to %s: %s", what, target, lb_system_error(errno));
    mode_t mask = umask(0); /* mkstemp makes the file private; give it the usual mode */
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    close(fd);
    if (strcmp(device, "pngqt") == 0) {
        /* Qt would look for a display and abort without one; its file drivers need none. */
        setenv("QT_QPA_PLATFORM", "offscreen", 0);
        setenv("QT_LOGGING_RULES", "default.warning=false", 0);
    }

    static jmp_buf env, env_end;
    pl_message[0] = '\0';
    pl_aborted = 0;
    plsexit(on_plexit);
    plsabort(on_plabort);
    if (setjmp(env) != 0) {
        /* A fatal PLplot error: close the stream if PLplot lets us, drop the file. */
        pl_jump = &env_end;
        if (setjmp(env_end) == 0)
            plend();
        pl_jump = NULL;
        unlink(temp);
        return lb_error(LB_ERR_IO, "%s: PLplot failed writing %s with device %s: %s", what, target, device,
                        pl_message[0] ? pl_message : "unknown error");
    }
    pl_jump = &env;
    plsdev(device);
    plsfnam(temp);
    plspage(0, 0, PAGE_WIDTH, PAGE_HEIGHT, 0, 0);
    set_colours();
    plinit();
    pladv(0);
    plschr(0, 0.9);
    draw(ctx);
    plend();
    pl_jump = NULL;

    lb_status st = LB_OK;
    if (pl_aborted)
        st = lb_error(LB_ERR_IO, "%s: PLplot reported an error writing %s: %s", what, target, pl_message);
    else if (check_output(temp, device) != LB_OK)
        st = lb_error_context("%s: %s", what, target);
    else
        st = lb_output_finish(temp, target, what, replace);
    if (st != LB_OK) {
        unlink(temp);
        return st;
    }
    snprintf(last_path, sizeof last_path, "%s", target);
    return LB_OK;
}

/* ---- drawing helpers ---- */

static void series_style(int s)
{
    plcol0(COL_SERIES + s % N_SERIES_COLOURS);
    pllsty(1 + (s / N_SERIES_COLOURS) % 8);
    plwidth(2.0);
}

static void plain_style(void)
{
    plcol0(COL_FG);
    pllsty(1);
    plwidth(1.0);
}

/* Axis frame of one panel: grid, box with ticks and labels, axis titles. */
static void frame(double x0, double x1, double y0, double y1, const char *xopt, const char *yopt,
                  const char *x_label, const char *y_label, const char *title)
{
    plwind(x0, x1, y0, y1);
    plcol0(COL_GRID);
    plwidth(1.0);
    plbox(strstr(xopt, "l") ? "gl" : "g", 0, 0, strstr(yopt, "l") ? "gl" : "g", 0, 0);
    plain_style();
    plbox(xopt, 0, 0, yopt, 0, 0);
    pllab(x_label ? x_label : "", y_label ? y_label : "", title ? title : "");
}

/* Lines through the finite points, broken at non-finite ones; single points get a dot. */
static void draw_broken_line(int n, const double *x, const double *y)
{
    int i = 0;
    while (i < n) {
        while (i < n && !(isfinite(x[i]) && isfinite(y[i])))
            i++;
        int start = i;
        while (i < n && isfinite(x[i]) && isfinite(y[i]))
            i++;
        if (i - start == 1) {
            PLFLT px = x[start], py = y[start];
            plpoin(1, &px, &py, 17);
        } else if (i - start > 1) {
            plline(i - start, x + start, y + start);
        }
    }
}

/* Range [lo, hi] with a margin of 5% on each side (a flat range gets +-1, or +-5%). */
static void pad_range(double *lo, double *hi)
{
    double span = *hi - *lo;
    if (span <= 0) {
        double d = fabs(*lo) > 0 ? 0.05 * fabs(*lo) : 1.0;
        *lo -= d;
        *hi += d;
        return;
    }
    *lo -= 0.05 * span;
    *hi += 0.05 * span;
}

/* A legend outside the right edge of the current viewport. */
static void legend(int n, const char *const *names, const PLINT *colours, const PLINT *styles, const int *with_symbol)
{
    enum { MAX_ENTRIES = 64 };
    if (n > MAX_ENTRIES)
        n = MAX_ENTRIES;
    PLINT opts[MAX_ENTRIES], text_colours[MAX_ENTRIES], symbol_numbers[MAX_ENTRIES];
    PLFLT widths[MAX_ENTRIES], symbol_scales[MAX_ENTRIES];
    const char *symbols[MAX_ENTRIES];
    for (int i = 0; i < n; i++) {
        opts[i] = PL_LEGEND_LINE | (with_symbol && with_symbol[i] ? PL_LEGEND_SYMBOL : 0);
        text_colours[i] = COL_FG;
        widths[i] = 2.0;
        symbol_scales[i] = 1.0;
        symbol_numbers[i] = 1;
        symbols[i] = "\u2022"; /* a bullet, like the markers of plpoin 17 */
    }
    PLFLT w = 0, h = 0;
    plain_style();
    pllegend(&w, &h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX, PL_POSITION_RIGHT | PL_POSITION_OUTSIDE,
             0.02, 0.0, 0.06, COL_BG, COL_FG, 1, 0, 0, n, opts, 1.0, 0.85, 2.0, 0.0, text_colours,
             (const char *const *)names, NULL, NULL, NULL, NULL, colours, styles, widths, colours, symbol_scales,
             symbol_numbers, symbols);
    plain_style();
}

/* ---- learning curves ---- */

typedef struct curves_ctx {
    const char *title, *x_label, *y_label;
    int n_series;
    const char *const *names;
    const int *n_points;
    const double *const *x, *const *y;
    double x0, x1, y0, y1;
} curves_ctx;

static void draw_curves(const void *p)
{
    const curves_ctx *c = p;
    plvpor(0.08, 0.71, 0.11, 0.91);
    frame(c->x0, c->x1, c->y0, c->y1, "bcnst", "bcnstv", c->x_label, c->y_label, c->title);
    enum { MAX_ENTRIES = 64 };
    PLINT colours[MAX_ENTRIES], styles[MAX_ENTRIES];
    int symbols[MAX_ENTRIES];
    for (int s = 0; s < c->n_series; s++) {
        series_style(s);
        if (c->n_points[s] > 0)
            draw_broken_line(c->n_points[s], c->x[s], c->y[s]);
        if (s < MAX_ENTRIES) {
            colours[s] = COL_SERIES + s % N_SERIES_COLOURS;
            styles[s] = 1 + (s / N_SERIES_COLOURS) % 8;
            symbols[s] = 0;
        }
    }
    legend(c->n_series, c->names, colours, styles, symbols);
}

lb_status lb_plot_curves(const char *png_path, const char *title, const char *x_label, const char *y_label,
                         int n_series, const char *const *names, const int *n_points, const double *const *x,
                         const double *const *y)
{
    return lb_plot_curves_range(png_path, title, x_label, y_label, n_series, names, n_points, x, y, NAN, NAN);
}

lb_status lb_plot_curves_range(const char *png_path, const char *title, const char *x_label, const char *y_label,
                               int n_series, const char *const *names, const int *n_points, const double *const *x,
                               const double *const *y, double y_min, double y_max)
{
    if (n_series < 1 || !names || !n_points || !x || !y)
        return lb_error(LB_ERR_VALUE, "lb_plot_curves: need at least one series with names, counts, x and y (got %d)",
                        n_series);
    curves_ctx c = {title, x_label, y_label, n_series, names, n_points, x, y, INFINITY, -INFINITY, INFINITY, -INFINITY};
    for (int s = 0; s < n_series; s++) {
        if (!names[s])
            return lb_error(LB_ERR_VALUE, "lb_plot_curves: series %d has no name", s);
        if (n_points[s] < 0 || (n_points[s] > 0 && (!x[s] || !y[s])))
            return lb_error(LB_ERR_VALUE, "lb_plot_curves: series '%s' has %d points but a NULL x or y", names[s],
                            n_points[s]);
        for (int i = 0; i < n_points[s]; i++) {
            if (!isfinite(x[s][i]) || !isfinite(y[s][i]))
                continue;
            c.x0 = fmin(c.x0, x[s][i]);
            c.x1 = fmax(c.x1, x[s][i]);
            c.y0 = fmin(c.y0, y[s][i]);
            c.y1 = fmax(c.y1, y[s][i]);
        }
    }
    if (!(c.x0 <= c.x1))
        return lb_error(LB_ERR_VALUE, "lb_plot_curves: no finite point in any of the %d series", n_series);
    pad_range(&c.x0, &c.x1);
    if (isnan(y_min) || isnan(y_max) || !(y_min < y_max)) {
        pad_range(&c.y0, &c.y1);
    } else {
        c.y0 = y_min;
        c.y1 = y_max;
    }
    return run_plot("learning-curve plot", png_path, draw_curves, &c);
}

/* ---- curves with a band (mean and range over seeds) ---- */

typedef struct band_ctx {
    curves_ctx base;
    const double *const *lo, *const *hi;
    double reference;
    const char *reference_label;
} band_ctx;

static void draw_band(const void *p)
{
    const band_ctx *b = p;
    const curves_ctx *c = &b->base;
    plvpor(0.08, 0.71, 0.11, 0.91);
    frame(c->x0, c->x1, c->y0, c->y1, "bcnst", "bcnstv", c->x_label, c->y_label, c->title);
    enum { MAX_ENTRIES = 64 };
    PLINT colours[MAX_ENTRIES + 1], styles[MAX_ENTRIES + 1];
    int symbols[MAX_ENTRIES + 1];
    const char *names[MAX_ENTRIES + 1];
    int n = c->n_series < MAX_ENTRIES ? c->n_series : MAX_ENTRIES;
    for (int s = 0; s < c->n_series; s++) {
        PLINT colour = COL_SERIES + s % N_SERIES_COLOURS;
        if (c->n_points[s] > 0) {
            plcol0(colour);
            plwidth(1.0);
            pllsty(3); /* dotted: the range over seeds */
            if (b->lo && b->lo[s])
                draw_broken_line(c->n_points[s], c->x[s], b->lo[s]);
            if (b->hi && b->hi[s])
                draw_broken_line(c->n_points[s], c->x[s], b->hi[s]);
            pllsty(1);
            plwidth(2.5);
            draw_broken_line(c->n_points[s], c->x[s], c->y[s]);
        }
        if (s < MAX_ENTRIES) {
            colours[s] = colour;
            styles[s] = 1;
            symbols[s] = 0;
            names[s] = c->names[s];
        }
    }
    if (isfinite(b->reference)) {
        PLFLT rx[2] = {c->x0, c->x1}, ry[2] = {b->reference, b->reference};
        plain_style();
        pllsty(2);
        plline(2, rx, ry);
        pllsty(1);
        colours[n] = COL_FG;
        styles[n] = 2;
        symbols[n] = 0;
        names[n] = b->reference_label ? b->reference_label : "reference";
        n++;
    }
    legend(n, names, colours, styles, symbols);
}

lb_status lb_plot_curves_band(const char *png_path, const char *title, const char *x_label, const char *y_label,
                              int n_series, const char *const *names, const int *n_points, const double *const *x,
                              const double *const *y, const double *const *lo, const double *const *hi, double y_min,
                              double y_max, double reference, const char *reference_label)
{
    if (n_series < 1 || !names || !n_points || !x || !y)
        return lb_error(LB_ERR_VALUE, "lb_plot_curves_band: need at least one series with names, counts, x and y "
                        "(got %d)", n_series);
    band_ctx b = {{title, x_label, y_label, n_series, names, n_points, x, y, INFINITY, -INFINITY, INFINITY, -INFINITY},
                  lo, hi, reference, reference_label};
    curves_ctx *c = &b.base;
    for (int s = 0; s < n_series; s++) {
        if (!names[s])
            return lb_error(LB_ERR_VALUE, "lb_plot_curves_band: series %d has no name", s);
        if (n_points[s] < 0 || (n_points[s] > 0 && (!x[s] || !y[s])))
            return lb_error(LB_ERR_VALUE, "lb_plot_curves_band: series '%s' has %d points but a NULL x or y", names[s],
                            n_points[s]);
        for (int i = 0; i < n_points[s]; i++) {
            if (!isfinite(x[s][i]))
                continue;
            const double vals[3] = {y[s][i], lo && lo[s] ? lo[s][i] : NAN, hi && hi[s] ? hi[s][i] : NAN};
            for (int k = 0; k < 3; k++)
                if (isfinite(vals[k])) {
                    c->x0 = fmin(c->x0, x[s][i]);
                    c->x1 = fmax(c->x1, x[s][i]);
                    c->y0 = fmin(c->y0, vals[k]);
                    c->y1 = fmax(c->y1, vals[k]);
                }
        }
    }
    if (!(c->x0 <= c->x1))
        return lb_error(LB_ERR_VALUE, "lb_plot_curves_band: no finite point in any of the %d series", n_series);
    if (isfinite(reference)) {
        c->y0 = fmin(c->y0, reference);
        c->y1 = fmax(c->y1, reference);
    }
    pad_range(&c->x0, &c->x1);
    if (isnan(y_min) || isnan(y_max) || !(y_min < y_max)) {
        pad_range(&c->y0, &c->y1);
    } else {
        c->y0 = y_min;
        c->y1 = y_max;
    }
    return run_plot("learning-curve plot", png_path, draw_band, &b);
}

/* ---- series over a logarithmic x axis (accuracy by distance or length, cost by length) ---- */

typedef struct log_x_ctx {
    int n_series, n_points;
    const char *const *names;
    const char *title, *x_label, *y_label, *reference_label;
    double *log_x;       /* [n_points] log10 x */
    const double *const *y; /* [n_series][n_points] in display units */
    double reference;    /* NAN for none */
    double x0, x1;       /* log10 range */
    double y0, y1;
} log_x_ctx;

static void draw_log_x(const void *p)
{
    const log_x_ctx *c = p;
    plvpor(0.08, 0.71, 0.11, 0.91);
    /* Log axis: ticks from PLplot, numbers written out (100, 200, 500, 1000, ...). */
    frame(c->x0, c->x1, c->y0, c->y1, "bcstl", "bcnstv", c->x_label, c->y_label, c->title);
    double span = c->x1 - c->x0;
    static const double steps[] = {1, 2, 5};
    for (int e = (int)floor(c->x0); e <= (int)ceil(c->x1); e++) {
        for (int k = 0; k < 3; k++) {
            if (span > 3.5 && k > 0)
                continue; /* many decades: label the powers of ten only */
            double v = steps[k] * pow(10.0, e), lv = log10(v);
            if (lv < c->x0 || lv > c->x1)
                continue;
            char text[32];
            snprintf(text, sizeof text, "%.0f", v);
            plmtex("b", 1.6, (lv - c->x0) / span, 0.5, text);
        }
    }
    enum { MAX_ENTRIES = 64 };
    const char *names[MAX_ENTRIES + 1];
    PLINT colours[MAX_ENTRIES + 1], styles[MAX_ENTRIES + 1];
    int symbols[MAX_ENTRIES + 1];
    int n = 0;
    for (int m = 0; m < c->n_series; m++) {
        series_style(m);
        draw_broken_line(c->n_points, c->log_x, c->y[m]);
        for (int i = 0; i < c->n_points; i++)
            if (isfinite(c->y[m][i])) {
                PLFLT px = c->log_x[i], py = c->y[m][i];
                plpoin(1, &px, &py, 17);
            }
        if (n < MAX_ENTRIES) {
            names[n] = c->names[m];
            colours[n] = COL_SERIES + m % N_SERIES_COLOURS;
            styles[n] = 1 + (m / N_SERIES_COLOURS) % 8;
            symbols[n++] = 1;
        }
    }
    if (isfinite(c->reference)) {
        PLFLT cx[2] = {c->x0, c->x1}, cy[2] = {c->reference, c->reference};
        plcol0(COL_FG);
        pllsty(2);
        plwidth(1.5);
        plline(2, cx, cy);
        names[n] = c->reference_label ? c->reference_label : "";
        colours[n] = COL_FG;
        styles[n] = 2;
        symbols[n++] = 0;
    }
    legend(n, names, colours, styles, symbols);
}

lb_status lb_plot_log_x(const char *png_path, const char *title, const char *x_label, const char *y_label,
                        int n_series, const char *const *names, int n_points, const double *x, const double *const *y,
                        double y_min, double y_max, double reference, const char *reference_label)
{
    if (n_series < 1 || n_points < 1 || !names || !x || !y)
        return lb_error(LB_ERR_VALUE, "%s plot: need at least one series and one point (got %d series, %d points)",
                        title ? title : "log-x", n_series, n_points);
    log_x_ctx c = {n_series, n_points, names, title ? title : "", x_label ? x_label : "", y_label ? y_label : "",
                   reference_label, NULL, y, reference, INFINITY, -INFINITY, y_min, y_max};
    for (int i = 0; i < n_points; i++)
        if (!(isfinite(x[i]) && x[i] > 0))
            return lb_error(LB_ERR_VALUE, "%s plot: x %d is %g; x must be > 0 (the axis is logarithmic)", c.title, i,
                            x[i]);
    double lo = INFINITY, hi = -INFINITY;
    for (int m = 0; m < n_series; m++) {
        if (!names[m] || !y[m])
            return lb_error(LB_ERR_VALUE, "%s plot: series %d has no name or no values", c.title, m);
        for (int i = 0; i < n_points; i++)
            if (isfinite(y[m][i])) {
                lo = fmin(lo, y[m][i]);
                hi = fmax(hi, y[m][i]);
            }
    }
    if (isnan(y_min) || isnan(y_max)) {
        if (!isfinite(lo))
            return lb_error(LB_ERR_VALUE, "%s plot: nothing finite to plot", c.title);
        if (isfinite(reference)) {
            lo = fmin(lo, reference);
            hi = fmax(hi, reference);
        }
        pad_range(&lo, &hi);
        c.y0 = lo;
        c.y1 = hi;
    }
    if (!(c.log_x = malloc((size_t)n_points * sizeof *c.log_x)))
        return lb_error(LB_ERR_MEMORY, "%s plot: out of memory", c.title);
    for (int i = 0; i < n_points; i++) {
        c.log_x[i] = log10(x[i]);
        c.x0 = fmin(c.x0, c.log_x[i]);
        c.x1 = fmax(c.x1, c.log_x[i]);
    }
    /* A quarter of a decade of margin (at least half a decade of span in all). */
    c.x0 -= 0.12;
    c.x1 += 0.12;
    if (c.x1 - c.x0 < 0.5) {
        double mid = 0.5 * (c.x0 + c.x1);
        c.x0 = mid - 0.25;
        c.x1 = mid + 0.25;
    }
    lb_status st = run_plot(c.title, png_path, draw_log_x, &c);
    free(c.log_x);
    return st;
}

lb_status lb_plot_accuracy_by_distance(const char *png_path, int n_models, const char *const *names, int n_points,
                                       const double *distances, const double *const *accuracy, double chance)
{
    if (n_models < 1 || n_points < 1 || !names || !distances || !accuracy)
        return lb_error(LB_ERR_VALUE, "lb_plot_accuracy_by_distance: need at least one model and one distance (got %d "
                                      "models, %d distances)", n_models, n_points);
    for (int i = 0; i < n_points; i++)
        if (!(isfinite(distances[i]) && distances[i] > 0))
            return lb_error(LB_ERR_VALUE, "lb_plot_accuracy_by_distance: distance %d is %g; distances must be > 0 "
                                          "(the axis is logarithmic)", i, distances[i]);
    for (int m = 0; m < n_models; m++)
        if (!names[m] || !accuracy[m])
            return lb_error(LB_ERR_VALUE, "lb_plot_accuracy_by_distance: model %d has no name or no accuracies", m);
    double **percent = calloc((size_t)n_models, sizeof *percent);
    lb_status st = percent ? LB_OK : lb_error(LB_ERR_MEMORY, "lb_plot_accuracy_by_distance: out of memory");
    for (int m = 0; st == LB_OK && m < n_models; m++) {
        if (!(percent[m] = malloc((size_t)n_points * sizeof **percent))) {
            st = lb_error(LB_ERR_MEMORY, "lb_plot_accuracy_by_distance: out of memory");
            break;
        }
        for (int i = 0; i < n_points; i++)
            percent[m][i] = 100.0 * accuracy[m][i];
    }
    char chance_label[64];
    snprintf(chance_label, sizeof chance_label, "chance (%.1f%%)", 100.0 * chance);
    if (st == LB_OK)
        st = lb_plot_log_x(png_path, "Accuracy by distance", "clue-to-query distance (events, log scale)",
                           "accuracy (%)", n_models, names, n_points, distances, (const double *const *)percent, 0, 105,
                           isfinite(chance) ? 100.0 * chance : NAN, chance_label);
    for (int m = 0; percent && m < n_models; m++)
        free(percent[m]);
    free(percent);
    return st;
}

/* ---- attention of one query ---- */

typedef struct attention_ctx {
    const char *title, *mark_label;
    int64_t n_keys, mark, argmax;
    const double *weight; /* [n_keys] */
    const double *log_weight;
    double top, log_lo, log_hi;
} attention_ctx;

static void mark_line(double x, double y0, double y1)
{
    PLFLT mx[2] = {x, x}, my[2] = {y0, y1};
    plcol0(COL_MARK);
    pllsty(2);
    plwidth(1.5);
    plline(2, mx, my);
    plain_style();
}

/* Axis labels "10^n" for log10 values (plslabelfunc; only the y axis asks). */
static void power_of_ten_label(PLINT axis, PLFLT value, char *label, PLINT length, PLPointer data)
{
    (void)axis;
    (void)data;
    snprintf(label, (size_t)length, "10#u%d#d", (int)lround(value));
}

static void draw_attention(const void *p)
{
    const attention_ctx *c = p;
    double x0 = -0.01 * (double)c->n_keys - 0.5, x1 = (double)c->n_keys - 0.5 + 0.01 * (double)c->n_keys;
    char text[160];

    /* Top: linear weights as impulses. */
    plvpor(0.08, 0.96, 0.55, 0.90);
    frame(x0, x1, 0, c->top, "bcst", "bcnstv", NULL, "attention weight", c->title);
    if (c->mark >= 0)
        mark_line((double)c->mark, 0, c->top);
    plcol0(COL_SERIES);
    plwidth(1.0);
    for (int64_t k = 0; k < c->n_keys; k++) {
        if (c->weight[k] <= 0)
            continue;
        PLFLT kx[2] = {(double)k, (double)k}, ky[2] = {0, c->weight[k]};
        plline(2, kx, ky);
    }
    plain_style();
    if (c->argmax != c->mark) {
        snprintf(text, sizeof text, "largest weight %.3g at key %lld", c->weight[c->argmax], (long long)c->argmax);
        plmtex("t", -1.5, 0.98, 1.0, text);
    }
    if (c->mark >= 0) { /* the dashed line named in a legend inside the top left corner */
        PLINT opts[1] = {PL_LEGEND_LINE}, text_colours[1] = {COL_FG}, line_colours[1] = {COL_MARK}, styles[1] = {2};
        PLFLT widths[1] = {1.5}, w = 0, h = 0;
        const char *names[1] = {c->mark_label};
        pllegend(&w, &h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX, PL_POSITION_LEFT | PL_POSITION_TOP | PL_POSITION_INSIDE,
                 0.01, 0.02, 0.06, COL_BG, COL_FG, 1, 0, 0, 1, opts, 1.0, 0.85, 2.0, 0.0, text_colours, names, NULL,
                 NULL, NULL, NULL, line_colours, styles, widths, NULL, NULL, NULL, NULL);
        plain_style();
    }
    if (c->mark >= 0) {
        PLFLT px = (double)c->mark, py = c->weight[c->mark];
        plcol0(COL_MARK);
        plpoin(1, &px, &py, 17);
        snprintf(text, sizeof text, "key %lld: weight %.3g", (long long)c->mark, c->weight[c->mark]);
        int left = c->mark > c->n_keys / 2; /* write towards the middle */
        double ty = fmin(fmax(py, 0.12 * c->top), 0.85 * c->top);
        plptex(px + (left ? -0.012 : 0.012) * (double)c->n_keys, ty, 1, 0, left ? 1.0 : 0.0, text);
        plain_style();
    }

    /* Bottom: log10 weights, so the spread over the other keys shows too. */
    plvpor(0.08, 0.96, 0.10, 0.45);
    /* log10 values on a linear axis, labelled 10^n every `step` decades. */
    double step = fmax(1.0, ceil((c->log_hi - c->log_lo) / 5.0));
    plwind(x0, x1, c->log_lo, c->log_hi);
    plcol0(COL_GRID);
    plbox("g", 0, 0, "g", step, 0);
    plain_style();
    plslabelfunc(power_of_ten_label, NULL);
    plbox("bcnst", 0, 0, "bcnstvo", step, step <= 5 ? (PLINT)step : 0);
    plslabelfunc(NULL, NULL);
    pllab("key position (the query is the last event)", "weight (log scale)", "");
    if (c->mark >= 0)
        mark_line((double)c->mark, c->log_lo, c->log_hi);
    plcol0(COL_SERIES);
    plwidth(1.0);
    int n = c->n_keys > INT32_MAX ? INT32_MAX : (int)c->n_keys;
    enum { CHUNK = 1024 }; /* drawn in chunks from a small buffer of positions */
    PLFLT bx[CHUNK + 1], by[CHUNK + 1];
    for (int start = 0; start < n; start += CHUNK) {
        int len = 0;
        for (int k = start > 0 ? start - 1 : 0; k < n && k <= start + CHUNK - 1; k++) {
            bx[len] = k;
            by[len++] = c->log_weight[k];
        }
        if (len > 1)
            plline(len, bx, by);
        else if (len == 1)
            plpoin(1, bx, by, 17);
    }
    plain_style();
}

lb_status lb_plot_attention(const char *png_path, const char *title, const float *weights, int64_t n_keys,
                            int64_t mark_position)
{
    return lb_plot_attention_marked(png_path, title, weights, n_keys, mark_position, "marked key");
}

lb_status lb_plot_attention_marked(const char *png_path, const char *title, const float *weights, int64_t n_keys,
                                   int64_t mark_position, const char *mark_label)
{
    if (!weights || n_keys < 1 || n_keys > INT32_MAX)
        return lb_error(LB_ERR_VALUE, "lb_plot_attention: need weights for 1 to 2^31-1 keys (got %lld%s)",
                        (long long)n_keys, weights ? "" : ", weights NULL");
    if (mark_position < -1 || mark_position >= n_keys)
        return lb_error(LB_ERR_VALUE, "lb_plot_attention: mark_position %lld is outside [0, %lld) (-1 for none)",
                        (long long)mark_position, (long long)n_keys);
    double *w = malloc((size_t)n_keys * 2 * sizeof *w);
    if (!w)
        return lb_error(LB_ERR_MEMORY, "lb_plot_attention: out of memory for %lld keys", (long long)n_keys);
    attention_ctx c = {title, mark_label && mark_label[0] ? mark_label : "marked key", n_keys, mark_position, 0, w,
                       w + n_keys, 0, 0, 0};
    double *lw = w + n_keys, lo = INFINITY, hi = -INFINITY;
    for (int64_t k = 0; k < n_keys; k++) {
        if (!isfinite(weights[k]) || weights[k] < 0) {
            free(w);
            return lb_error(LB_ERR_NUMERIC, "lb_plot_attention: weight %g at key %lld is not a finite value >= 0",
                            (double)weights[k], (long long)k);
        }
        w[k] = weights[k];
        lw[k] = w[k] > 1e-12 ? w[k] : 1e-12;
        if (w[k] > w[c.argmax])
            c.argmax = k;
        lo = fmin(lo, lw[k]);
        hi = fmax(hi, lw[k]);
    }
    for (int64_t k = 0; k < n_keys; k++)
        lw[k] = log10(lw[k]);
    c.top = w[c.argmax] > 0 ? 1.15 * w[c.argmax] : 1.0;
    c.log_lo = floor(log10(lo)) - 0.2;
    c.log_hi = fmax(ceil(log10(hi)), c.log_lo + 1) + 0.2;
    lb_status st = run_plot("attention plot", png_path, draw_attention, &c);
    free(w);
    return st;
}

/* ---- attention matrix ---- */

typedef struct matrix_ctx {
    const char *title;
    int64_t n_queries, n_keys;
    int nx, ny;            /* cells after reduction */
    const double *const *image; /* [nx][ny]: image[x][y], x = key block, y = query block */
    double zmax;
} matrix_ctx;

static void draw_matrix(const void *p)
{
    const matrix_ctx *c = p;
    /* White (0) through blue to dark navy (the largest weight). */
    PLFLT pos[3] = {0, 0.5, 1}, r[3] = {1, 0.42, 0.03}, g[3] = {1, 0.68, 0.19}, b[3] = {1, 0.84, 0.42};
    plscmap1n(256);
    plscmap1l(1, 3, pos, r, g, b, NULL);
    double tk = (double)c->n_keys, tq = (double)c->n_queries;
    plvpor(0.08, 0.84, 0.11, 0.91);
    plwind(0, tk, tq, 0); /* query 0 at the top */
    plimage(c->image, c->nx, c->ny, 0, tk, 0, tq, 0, c->zmax, 0, tk, 0, tq);
    plain_style();
    plbox("bcnst", 0, 0, "bcnstv", 0, 0);
    pllab("key position", "query position", c->title ? c->title : "");

    PLFLT bar_w = 0, bar_h = 0;
    PLINT label_opts[1] = {PL_COLORBAR_LABEL_RIGHT};
    const char *labels[1] = {"weight"};
    const char *axis_opts[1] = {"bcvtm"};
    PLFLT ticks[1] = {0};
    PLINT sub_ticks[1] = {0};
    PLINT n_values[1] = {2};
    PLFLT range[2] = {0, c->zmax};
    const PLFLT *values[1] = {range};
    plcolorbar(&bar_w, &bar_h, PL_COLORBAR_GRADIENT, PL_POSITION_RIGHT | PL_POSITION_OUTSIDE, 0.02, 0, 0.03, 0.8,
               COL_BG, COL_FG, 1, 0, 0, 0, 0, 1, label_opts, labels, 1, axis_opts, ticks, sub_ticks, n_values, values);
}

lb_status lb_plot_attention_matrix(const char *png_path, const char *title, const float *weights, int64_t n_queries,
                                   int64_t n_keys)
{
    if (!weights || n_queries < 1 || n_keys < 1 || n_queries > INT32_MAX || n_keys > INT32_MAX)
        return lb_error(LB_ERR_VALUE, "lb_plot_attention_matrix: need a [Tq, Tk] matrix with Tq, Tk >= 1 (got [%lld, "
                                      "%lld]%s)", (long long)n_queries, (long long)n_keys, weights ? "" : ", NULL");
    /* Blocks of bq x bk cells reduced by their maximum. */
    int64_t bq = (n_queries + MAX_IMAGE_SIDE - 1) / MAX_IMAGE_SIDE, bk = (n_keys + MAX_IMAGE_SIDE - 1) / MAX_IMAGE_SIDE;
    int ny = (int)((n_queries + bq - 1) / bq), nx = (int)((n_keys + bk - 1) / bk);
    double *cells = calloc((size_t)nx * (size_t)ny, sizeof *cells);
    const double **columns = malloc((size_t)nx * sizeof *columns);
    if (!cells || !columns) {
        free(cells);
        free(columns);
        return lb_error(LB_ERR_MEMORY, "lb_plot_attention_matrix: out of memory for %d x %d cells", nx, ny);
    }
    double zmax = 0;
    for (int64_t q = 0; q < n_queries; q++)
        for (int64_t k = 0; k < n_keys; k++) {
            double v = weights[q * n_keys + k];
            if (!isfinite(v) || v < 0) {
                free(cells);
                free(columns);
                return lb_error(LB_ERR_NUMERIC, "lb_plot_attention_matrix: weight %g at [%lld, %lld] is not a finite "
                                                "value >= 0", v, (long long)q, (long long)k);
            }
            double *cell = &cells[(size_t)(k / bk) * (size_t)ny + (size_t)(q / bq)];
            *cell = fmax(*cell, v);
            zmax = fmax(zmax, v);
        }
    for (int x = 0; x < nx; x++)
        columns[x] = cells + (size_t)x * (size_t)ny;
    matrix_ctx c = {title, n_queries, n_keys, nx, ny, columns, zmax > 0 ? zmax : 1.0};
    lb_status st = run_plot("attention-matrix plot", png_path, draw_matrix, &c);
    free(cells);
    free(columns);
    return st;
}
