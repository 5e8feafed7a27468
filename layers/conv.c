/* Causal dilated 1-D convolution layers (see conv.h for the formula): parameters with
 * PyTorch's layout and initialisation around the lb_causal_conv1d op (autograd/ops.h; the
 * kernels are in kernels/conv.h), and the residual stack. */
#include "layers/conv.h"

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
    return lb_causal_conv1d(g, x, c->weight, c->bias, c->dilation); /* [B, T, C_in] -> [B, T, C_out] */
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
    LB_CHECK_ARG(s, -1);
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
