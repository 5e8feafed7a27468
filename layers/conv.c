/* Causal dilated 1-D convolution as one custom op (see conv.h for the formula).
 *
 * Named dimensions, used in every shape comment below:
 *   B batch, T time steps, Ci input channels, Co output channels, K kernel taps,
 *   d dilation; tap j reads the input shifted by s_j = d*(K-1-j) steps into the past.
 * Every tensor is row-major and contiguous; x[b] is a [T, Ci] matrix and its rows
 * s..T-1 a [T-s, Ci] matrix, so each tap is a plain gemm on shifted row ranges:
 *
 *   forward   y[b, s_j:T]     += x[b, 0:T-s_j] [T-s_j, Ci] @ Wj [Ci, Co]
 *   backward  dx[b, 0:T-s_j]  += dy[b, s_j:T] [T-s_j, Co] @ Wjᵀ [Co, Ci]
 *             dWj             += x[b, 0:T-s_j]ᵀ [Ci, T-s_j] @ dy[b, s_j:T] [T-s_j, Co]
 *             dbias           += Σ_{b,t} dy[b, t]          (summed in double)
 *
 * where Wj[c, o] = weight[o, c, j], repacked once per call into a [K, Ci, Co] buffer
 * (PyTorch's [Co, Ci, K] layout has no unit stride along c for a fixed tap).
 */
#include "layers/conv.h"


#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lb_status lb_conv1d_init(lb_conv1d *c, lb_params *ps, const char *prefix, int64_t in_channels,
                         int64_t out_channels, int64_t kernel_size, int64_t dilation, lb_dtype dtype, lb_rng *rng)
{
    if (!c || !ps || !rng)
        return lb_error(LB_ERR_VALUE, "conv1d init: %s is NULL", !c ? "the layer" : !ps ? "the parameter list" : "rng");
    memset(c, 0, sizeof *c);
    if (in_channels < 1 || out_channels < 1 || kernel_size < 1 || dilation < 1)
        return lb_error(LB_ERR_VALUE,
                        "conv1d init: in_channels (%lld), out_channels (%lld), kernel_size (%lld) and dilation "
                        "(%lld) must all be >= 1",
                        (long long)in_channels, (long long)out_channels, (long long)kernel_size, (long long)dilation);
    if (dtype != LB_FLOAT32 && dtype != LB_FLOAT64)
        return lb_error(LB_ERR_DTYPE, "conv1d init: dtype %d is neither float32 nor float64", (int)dtype);
    int64_t sw[3] = {out_channels, in_channels, kernel_size}, sb[1] = {out_channels};
    c->weight = lb_params_add(ps, prefix, "weight", dtype, 3, sw);
    c->bias = c->weight ? lb_params_add(ps, prefix, "bias", dtype, 1, sb) : NULL;
    if (!c->weight || !c->bias)
        return lb_error_context("conv1d init (prefix '%s')", prefix ? prefix : "");
    c->in_channels = in_channels;
    c->out_channels = out_channels;
    c->kernel_size = kernel_size;
    c->dilation = dilation;
    const double bound = 1.0 / sqrt((double)(in_channels * kernel_size)); /* torch.nn.Conv1d.reset_parameters */
    lb_init_uniform(c->weight, rng, bound);
    lb_init_uniform(c->bias, rng, bound);
    return LB_OK;
}

/* c = alpha * op(a) @ op(b) + beta * c on raw row-major matrices:
 *   op(a): [m, k], op(b): [k, n], c: [m, n]; ld* are row strides in elements. */
static void gemm(lb_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const void *a,
                 int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    if (m <= 0 || n <= 0 || k <= 0) /* callers only pass empty products with beta = 1 */
        return;
    CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    if (dtype == LB_FLOAT32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, (float)beta, c,
                    (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, beta, c,
                    (int)ldc);
}

/* weight [Co, Ci, K] -> new contiguous [K, Ci, Co] (tap-major, ready for gemm). */
static lb_tensor *repack_taps(const lb_tensor *w)
{
    const int64_t Co = w->shape[0], Ci = w->shape[1], K = w->shape[2];
    int64_t shape[3] = {K, Ci, Co};
    lb_tensor *r = lb_tensor_zeros(w->dtype, 3, shape);
    if (!r)
        return NULL;
    LB_DISPATCH(w->dtype, real, {
        const real *src = lb_tensor_data(w);
        real *dst = lb_tensor_data(r);
        for (int64_t o = 0; o < Co; o++)
            for (int64_t c = 0; c < Ci; c++)
                for (int64_t j = 0; j < K; j++)
                    dst[(j * Ci + c) * Co + o] = src[(o * Ci + c) * K + j];
    });
    return r;
}

/* inputs: x [B,T,Ci], weight [Co,Ci,K], bias [Co]; attr_i[0] = d; node->grad dy [B,T,Co]. */
static lb_status conv1d_backward(lb_var *node)
{
    lb_var *x = node->inputs[0], *w = node->inputs[1], *bias = node->inputs[2];
    const lb_tensor *dy = node->grad;
    const lb_dtype dt = dy->dtype;
    const int64_t B = dy->shape[0], T = dy->shape[1], Co = dy->shape[2];
    const int64_t Ci = w->value->shape[1], K = w->value->shape[2], d = node->attr_i[0];
    const size_t es = lb_dtype_size(dt);
    const char *dyd = lb_tensor_data(dy), *xd = lb_tensor_data(x->value);
    if (bias->requires_grad) { /* dbias [Co] += Σ_{b,t} dy[b,t] */
        lb_tensor *gb = lb_grad_buffer(bias);
        double *acc = calloc((size_t)Co, sizeof *acc);
        if (!gb || !acc) {
            free(acc);
            return gb ? lb_error(LB_ERR_MEMORY, "conv1d backward: out of memory") : lb_last_status();
        }
        LB_DISPATCH(dt, real, {
            const real *g = (const real *)dyd;
            for (int64_t r = 0; r < B * T; r++)
                for (int64_t o = 0; o < Co; o++)
                    acc[o] += (double)g[r * Co + o];
            real *gbd = lb_tensor_data(gb);
            for (int64_t o = 0; o < Co; o++)
                gbd[o] += (real)acc[o];
        });
        free(acc);
    }
    if (x->requires_grad) {
        lb_tensor *gx = lb_grad_buffer(x);
        lb_tensor *wr = gx ? repack_taps(w->value) : NULL;
        if (!wr)
            return lb_last_status();
        char *gxd = lb_tensor_data(gx);
        const char *wrd = lb_tensor_data(wr);
        for (int64_t j = 0; j < K; j++) {
            const int64_t s = d * (K - 1 - j);
            if (s >= T)
                continue;
            /* dx[b, 0:T-s] [T-s,Ci] += dy[b, s:T] [T-s,Co] @ Wjᵀ [Co,Ci] */
            for (int64_t b = 0; b < B; b++)
                gemm(dt, 0, 1, T - s, Ci, Co, dyd + (size_t)((b * T + s) * Co) * es, Co,
                     wrd + (size_t)(j * Ci * Co) * es, Co, 1.0, gxd + (size_t)(b * T * Ci) * es, Ci);
        }
        lb_tensor_free(wr);
    }
    if (w->requires_grad) {
        lb_tensor *gw = lb_grad_buffer(w);
        int64_t shape[3] = {K, Ci, Co};
        lb_tensor *gr = gw ? lb_tensor_zeros(dt, 3, shape) : NULL; /* dW in tap-major [K,Ci,Co] */
        if (!gr)
            return lb_last_status();
        char *grd = lb_tensor_data(gr);
        for (int64_t j = 0; j < K; j++) {
            const int64_t s = d * (K - 1 - j);
            if (s >= T)
                continue;
            /* dWj [Ci,Co] += x[b, 0:T-s]ᵀ [Ci,T-s] @ dy[b, s:T] [T-s,Co] */
            for (int64_t b = 0; b < B; b++)
                gemm(dt, 1, 0, Ci, Co, T - s, xd + (size_t)(b * T * Ci) * es, Ci,
                     dyd + (size_t)((b * T + s) * Co) * es, Co, 1.0, grd + (size_t)(j * Ci * Co) * es, Co);
        }
        LB_DISPATCH(dt, real, { /* scatter back to PyTorch's [Co, Ci, K] */
            const real *src = (const real *)grd;
            real *dst = lb_tensor_data(gw);
            for (int64_t o = 0; o < Co; o++)
                for (int64_t c = 0; c < Ci; c++)
                    for (int64_t j = 0; j < K; j++)
                        dst[(o * Ci + c) * K + j] += src[(j * Ci + c) * Co + o];
        });
        lb_tensor_free(gr);
    }
    return LB_OK;
}

lb_var *lb_conv1d_forward(lb_graph *g, const lb_conv1d *c, lb_var *x)
{
    char a[128];
    if (!g) {
        lb_error(LB_ERR_STATE, "conv1d: the graph is NULL (create one with lb_graph_new)");
        return NULL;
    }
    if (!c || !c->weight || !c->bias) {
        lb_error(LB_ERR_STATE, "conv1d: the layer is not initialised (call lb_conv1d_init first)");
        return NULL;
    }
    if (!x) {
        if (lb_last_status() == LB_OK)
            lb_error(LB_ERR_VALUE, "conv1d: the input x is NULL");
        return NULL;
    }
    const lb_tensor *xv = x->value, *wv = c->weight->value;
    const lb_dtype dt = wv->dtype;
    if (xv->ndim != 3 || xv->shape[2] != c->in_channels) {
        lb_error(LB_ERR_SHAPE, "conv1d: x is %s; expected [B, T, in_channels] = [B, T, %lld] (time before channels)",
                 lb_tensor_describe(xv, a, sizeof a), (long long)c->in_channels);
        return NULL;
    }
    if (xv->dtype != dt) {
        lb_error(LB_ERR_DTYPE, "conv1d: x is %s but the parameters are %s", lb_tensor_describe(xv, a, sizeof a),
                 lb_dtype_name(dt));
        return NULL;
    }
    const int64_t B = xv->shape[0], T = xv->shape[1], Ci = c->in_channels, Co = c->out_channels;
    const int64_t K = c->kernel_size, d = c->dilation;
    int64_t shape[3] = {B, T, Co};
    lb_tensor *y = lb_tensor_zeros(dt, 3, shape);
    lb_tensor *wr = y ? repack_taps(wv) : NULL;
    if (!wr) {
        lb_tensor_free(y);
        return NULL;
    }
    const size_t es = lb_dtype_size(dt);
    char *yd = lb_tensor_data(y);
    const char *xd = lb_tensor_data(xv), *wrd = lb_tensor_data(wr);
    LB_DISPATCH(dt, real, { /* y[b,t] = bias */
        const real *bd = lb_tensor_data(c->bias->value);
        real *out = (real *)yd;
        for (int64_t r = 0; r < B * T; r++)
            for (int64_t o = 0; o < Co; o++)
                out[r * Co + o] = bd[o];
    });
    for (int64_t j = 0; j < K; j++) {
        const int64_t s = d * (K - 1 - j);
        if (s >= T)
            continue;
        /* y[b, s:T] [T-s,Co] += x[b, 0:T-s] [T-s,Ci] @ Wj [Ci,Co] */
        for (int64_t b = 0; b < B; b++)
            gemm(dt, 0, 0, T - s, Co, Ci, xd + (size_t)(b * T * Ci) * es, Ci, wrd + (size_t)(j * Ci * Co) * es, Co,
                 1.0, yd + (size_t)((b * T + s) * Co) * es, Co);
    }
    lb_tensor_free(wr);
    lb_var *in[3] = {x, c->weight, c->bias};
    lb_var *v = lb_custom(g, 3, in, y, conv1d_backward, NULL, NULL);
    if (v)
        v->attr_i[0] = d;
    return v;
}

/* ---- residual stack ---- */

lb_status lb_conv_stack_init(lb_conv_stack *s, lb_params *ps, const char *prefix, int64_t channels,
                             int64_t kernel_size, int n_layers, lb_dtype dtype, lb_rng *rng)
{
    if (!s)
        return lb_error(LB_ERR_VALUE, "conv stack init: the stack is NULL");
    memset(s, 0, sizeof *s);
    if (n_layers < 1 || n_layers > 32)
        return lb_error(LB_ERR_VALUE, "conv stack init: n_layers is %d; it must be in [1, 32] (dilation 2^i)",
                        n_layers);
    if (channels < 1 || kernel_size < 1)
        return lb_error(LB_ERR_VALUE, "conv stack init: channels (%lld) and kernel_size (%lld) must be >= 1",
                        (long long)channels, (long long)kernel_size);
    s->layers = calloc((size_t)n_layers, sizeof *s->layers);
    if (!s->layers)
        return lb_error(LB_ERR_MEMORY, "conv stack init: out of memory");
    for (int i = 0; i < n_layers; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s%s%d", prefix ? prefix : "", prefix && prefix[0] ? "." : "", i);
        if (lb_conv1d_init(&s->layers[i], ps, name, channels, channels, kernel_size, (int64_t)1 << i, dtype, rng) !=
            LB_OK) {
            lb_conv_stack_free(s);
            return lb_error_context("conv stack layer %d", i);
        }
    }
    s->n_layers = n_layers;
    s->channels = channels;
    s->kernel_size = kernel_size;
    return LB_OK;
}

void lb_conv_stack_free(lb_conv_stack *s)
{
    if (!s)
        return;
    free(s->layers);
    memset(s, 0, sizeof *s);
}

int64_t lb_conv_stack_receptive_field(const lb_conv_stack *s)
{
    if (!s || s->n_layers < 1)
        return 0;
    return 1 + (s->kernel_size - 1) * (((int64_t)1 << s->n_layers) - 1);
}

lb_var *lb_conv_stack_forward(lb_graph *g, const lb_conv_stack *s, lb_var *x)
{
    if (!s || s->n_layers < 1 || !s->layers) {
        lb_error(LB_ERR_STATE, "conv stack: not initialised (call lb_conv_stack_init first)");
        return NULL;
    }
    lb_var *h = x;
    for (int i = 0; i < s->n_layers && h; i++)
        h = lb_add(g, h, lb_gelu(g, lb_conv1d_forward(g, &s->layers[i], h))); /* h + GELU(conv_i(h)) */
    if (!h)
        lb_error_context("conv stack");
    return h;
}

int lb_conv_layers_for(int64_t seq_len, int64_t kernel_size)
{
    if (seq_len < 1 || kernel_size < 2)
        return -1;
    int n = 1;
    while (n < 62 && 1 + (kernel_size - 1) * (((int64_t)1 << n) - 1) < seq_len)
        n++;
    return n;
}
