/* Plots for the command line, drawn with PLplot (Debian libplplot-dev) into PNG files.
 *
 * Device: PLplot's "pngcairo" (package plplot-driver-cairo) when installed, else
 * "pngqt" (plplot-driver-qt, run with Qt's offscreen platform unless
 * QT_QPA_PLATFORM is set), else "svg" (built into libplplot17), which writes an SVG
 * file next to the requested one: "x.png" becomes "x.svg". LOOKBACK_PLOT_DEVICE
 * (pngcairo, pngqt or svg) forces a device. lb_plot_device tells which one is used
 * and lb_plot_last_path which file the last successful plot wrote.
 *
 * Files: each plot is drawn into a temporary file next to the target and renamed
 * over it only when complete and checked (signature and size), so a failure never
 * leaves a partial file nor touches an existing one.
 *
 * Errors: every function returns LB_OK or a status with a message (lb_last_error)
 * naming the plot and the problem: LB_ERR_VALUE for bad arguments (no series, a
 * NULL array, nothing finite to plot, a non-positive distance), LB_ERR_NUMERIC for
 * a non-finite attention weight, LB_ERR_IO when no device is available or the file
 * cannot be written. Nothing exits or aborts: PLplot's exit and abort handlers are
 * replaced for the duration of a plot. Not thread-safe (PLplot has one global
 * state): call from one thread.
 */
#ifndef LB_LAB_PLOT_H
#define LB_LAB_PLOT_H

#include <stdint.h>

#include "tensor/error.h"
#include "tensor/api.h"

LB_API_BEGIN

/* Line plot of n_series curves, one colour each, with a legend of `names`:
 * series s has n_points[s] points (x[s][i], y[s][i]). Axis ranges cover the finite
 * points with a margin; a non-finite point breaks its line. A series with no points
 * still gets its legend entry. Used for learning curves (loss or accuracy against
 * step or time). */
lb_status lb_plot_curves(const char *png_path, const char *title, const char *x_label, const char *y_label,
                         int n_series, const char *const *names, const int *n_points, const double *const *x,
                         const double *const *y);

/* The same with a fixed y axis from y_min to y_max (when either is NAN, as
 * lb_plot_curves): accuracy curves use 0 to 105 in percent, so curves of different runs
 * compare at a glance and 100 % is never cut off. */
lb_status lb_plot_curves_range(const char *png_path, const char *title, const char *x_label, const char *y_label,
                               int n_series, const char *const *names, const int *n_points, const double *const *x,
                               const double *const *y, double y_min, double y_max);

/* Curves with a band: per series s, a mean line y[s][i] at x[s][i] (i < n_points[s]) drawn
 * thick, and its range lo[s][i]..hi[s][i] drawn as thin dotted lines of the same colour
 * (lo and hi may be NULL, or NAN at a point, for no range there), with a legend of
 * `names`. y from y_min to y_max (either NAN: over the finite values with a margin);
 * reference (NAN for none) is a dashed horizontal line labelled reference_label (e.g.
 * chance). Used for learning curves over seeds: validation score against CPU seconds,
 * mean and range. */
lb_status lb_plot_curves_band(const char *png_path, const char *title, const char *x_label, const char *y_label,
                              int n_series, const char *const *names, const int *n_points, const double *const *x,
                              const double *const *y, const double *const *lo, const double *const *hi, double y_min,
                              double y_max, double reference, const char *reference_label);

/* Accuracy against clue-to-query distance for n_models models, all measured at the
 * same n_points distances (> 0, in positions), on a logarithmic distance axis
 * (e.g. 100 to 7,000), with markers at the measured points and the chance level as
 * a dashed line. accuracy[m][i] and chance are fractions in [0, 1], shown in
 * percent; a NaN accuracy is left out. */
lb_status lb_plot_accuracy_by_distance(const char *png_path, int n_models, const char *const *names, int n_points,
                                       const double *distances, const double *const *accuracy, double chance);

/* Lines over a logarithmic x axis (x > 0, tick numbers written out: 100, 200, 500,
 * ...), one colour per series with a marker at each point and a legend of `names`:
 * series s has the value y[s][i] at x[i] (the same n_points x for every series; NAN
 * leaves a point out). y on a linear axis from y_min to y_max, or, when either is NAN,
 * over the finite values with a margin. reference (NAN for none) is drawn as a dashed
 * horizontal line with the legend entry reference_label (e.g. chance). Used for
 * accuracy against distance or test length and for cost against length. */
lb_status lb_plot_log_x(const char *png_path, const char *title, const char *x_label, const char *y_label,
                        int n_series, const char *const *names, int n_points, const double *x, const double *const *y,
                        double y_min, double y_max, double reference, const char *reference_label);

/* The attention weights of ONE query (e.g. the alarm, the last event) over its
 * n_keys keys: weights[k] for key position k = 0 .. n_keys - 1, as impulses. Top
 * panel linear, bottom panel log10 (weights below 1e-12 drawn at 1e-12), so both
 * the spike and the spread of the rest are visible. mark_position (-1 for none)
 * is highlighted with a dashed line named in a legend, a marker and its weight
 * (e.g. where the clue was). Weights must be finite and >= 0. */
lb_status lb_plot_attention(const char *png_path, const char *title, const float *weights, int64_t n_keys,
                            int64_t mark_position);
/* The same with the marked position's line named `mark_label` in a legend (e.g. "clue
 * position"); lb_plot_attention names it "marked key". */
lb_status lb_plot_attention_marked(const char *png_path, const char *title, const float *weights, int64_t n_keys,
                                   int64_t mark_position, const char *mark_label);

/* Heatmap of an attention matrix weights [Tq, Tk] (row-major; row q = query q's
 * weights over the keys), query 0 at the top, with a colour bar. Matrices larger
 * than 1,000 cells on a side are reduced to at most 1,000 by taking the maximum of
 * each block, so a single sharp weight stays visible. */
lb_status lb_plot_attention_matrix(const char *png_path, const char *title, const float *weights, int64_t n_queries,
                                   int64_t n_keys);

/* The PLplot device plots are drawn with ("pngcairo", "pngqt" or "svg"), or NULL
 * with LB_ERR_IO in lb_last_error when none is available (or LOOKBACK_PLOT_DEVICE
 * names one that is not). */
const char *lb_plot_device(void);

/* Draws the plots that follow with `device` ("pngcairo", "pngqt" or "svg"; it must be
 * installed) instead of the usual choice; NULL restores the usual choice. Errors:
 * LB_ERR_IO when PLplot lacks the device, LB_ERR_VALUE for another name. */
lb_status lb_plot_use_device(const char *device);

/* The file the last successful plot wrote ("" before any): the requested path, or
 * its ".svg" sibling with the svg device. */
const char *lb_plot_last_path(void);

LB_API_END

#endif
