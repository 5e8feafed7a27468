/* LSTM layers: a stack of lb_lstm_layer ops (autograd/ops.h; the kernels are in
 * kernels/lstm.h), with the parameters and state checks of torch.nn.LSTM.
 * Named dims: B batch, T time steps, I input_size, H hidden_size, L n_layers. */
#include "layers/lstm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- parameters ---- */

lb_status lb_lstm_init(lb_lstm *l, lb_params *ps, const char *prefix, int64_t input_size, int64_t hidden_size,
                       int n_layers, lb_dtype dtype, lb_rng *rng)
{
    if (!l || !ps || !rng)
        return lb_error(LB_ERR_VALUE, "lstm init: %s is NULL", !l ? "the layer" : !ps ? "the parameter list" : "rng");
    memset(l, 0, sizeof *l);
    if (input_size < 1 || hidden_size < 1)
        return lb_error(LB_ERR_VALUE, "lstm init: input_size (%lld) and hidden_size (%lld) must be >= 1",
                        (long long)input_size, (long long)hidden_size);
    if (n_layers < 1 || n_layers > LB_LSTM_MAX_LAYERS)
        return lb_error(LB_ERR_VALUE, "lstm init: n_layers is %d; it must be in [1, %d]", n_layers,
                        LB_LSTM_MAX_LAYERS);
    if (dtype != LB_FLOAT32 && dtype != LB_FLOAT64)
        return lb_error(LB_ERR_DTYPE, "lstm init: dtype %d is neither float32 nor float64", (int)dtype);
    const int64_t H = hidden_size;
    const double bound = 1.0 / sqrt((double)H); /* torch.nn.LSTM.reset_parameters */
    for (int k = 0; k < n_layers; k++) {
        int64_t s_ih[2] = {4 * H, k == 0 ? input_size : H}, s_hh[2] = {4 * H, H}, s_b[1] = {4 * H};
        const struct {
            const char *name;
            int ndim;
            const int64_t *shape;
            lb_var **slot;
        } specs[4] = {{"weight_ih", 2, s_ih, &l->weight_ih[k]},
                      {"weight_hh", 2, s_hh, &l->weight_hh[k]},
                      {"bias_ih", 1, s_b, &l->bias_ih[k]},
                      {"bias_hh", 1, s_b, &l->bias_hh[k]}};
        for (int i = 0; i < 4; i++) {
            char name[64];
            snprintf(name, sizeof name, "%s_l%d", specs[i].name, k);
            if (!(*specs[i].slot = lb_params_add(ps, prefix, name, dtype, specs[i].ndim, specs[i].shape)))
                return lb_error_context("lstm init (prefix '%s', layer %d)", prefix ? prefix : "", k);
        }
        lb_init_uniform(l->weight_ih[k], rng, bound);
        lb_init_uniform(l->weight_hh[k], rng, bound);
        lb_init_uniform(l->bias_ih[k], rng, bound);
        lb_init_uniform(l->bias_hh[k], rng, bound);
    }
    l->n_layers = n_layers; /* set last: a failed init leaves a layer lb_lstm_forward refuses */
    l->input_size = input_size;
    l->hidden_size = hidden_size;
    return LB_OK;
}

void lb_lstm_add_forget_bias(lb_lstm *l, double value)
{
    if (!l)
        return;
    const int64_t H = l->hidden_size;
    for (int k = 0; k < l->n_layers; k++) {
        lb_tensor *b = l->bias_ih[k] ? l->bias_ih[k]->value : NULL;
        if (!b)
            continue;
        for (int64_t j = H; j < 2 * H; j++) {
            int64_t idx[1] = {j};
            lb_tensor_set(b, idx, lb_tensor_get(b, idx) + value);
        }
    }
}

/* ---- the layer stack ---- */

static lb_status check_state(const char *what, const lb_var *s, const lb_lstm *l, int64_t B, lb_dtype dt)
{
    char a[128];
    const lb_tensor *v = s->value;
    if (v->ndim != 3 || v->shape[0] != l->n_layers || v->shape[1] != B || v->shape[2] != l->hidden_size)
        return lb_error(LB_ERR_SHAPE, "lstm: %s is %s; expected [L, B, H] = [%d, %lld, %lld]", what,
                        lb_tensor_describe(v, a, sizeof a), l->n_layers, (long long)B, (long long)l->hidden_size);
    if (v->dtype != dt)
        return lb_error(LB_ERR_DTYPE, "lstm: %s is %s but the parameters are %s", what,
                        lb_tensor_describe(v, a, sizeof a), lb_dtype_name(dt));
    return LB_OK;
}

lb_var *lb_lstm_forward(lb_graph *g, const lb_lstm *l, lb_var *x, lb_var *h0, lb_var *c0, lb_var **h_n,
                        lb_var **c_n)
{
    char a[128];
    if (h_n)
        *h_n = NULL;
    if (c_n)
        *c_n = NULL;
    if (!g) {
        lb_error(LB_ERR_STATE, "lstm: the graph is NULL (create one with lb_graph_new)");
        return NULL;
    }
    if (!l || l->n_layers < 1 || l->n_layers > LB_LSTM_MAX_LAYERS || !l->weight_ih[0]) {
        lb_error(LB_ERR_STATE, "lstm: the layer is not initialised (call lb_lstm_init first)");
        return NULL;
    }
    if (!x) {
        if (lb_last_status() == LB_OK)
            lb_error(LB_ERR_VALUE, "lstm: the input x is NULL");
        return NULL;
    }
    const lb_tensor *xv = x->value;
    const lb_dtype dt = l->weight_ih[0]->value->dtype;
    if (xv->ndim != 3 || xv->shape[2] != l->input_size || xv->shape[0] < 1 || xv->shape[1] < 1) {
        lb_error(LB_ERR_SHAPE, "lstm: x is %s; expected [B, T, input_size] = [B, T, %lld] with B, T >= 1 "
                               "(batch first, like torch.nn.LSTM(batch_first=True))",
                 lb_tensor_describe(xv, a, sizeof a), (long long)l->input_size);
        return NULL;
    }
    if (xv->dtype != dt) {
        lb_error(LB_ERR_DTYPE, "lstm: x is %s but the parameters are %s", lb_tensor_describe(xv, a, sizeof a),
                 lb_dtype_name(dt));
        return NULL;
    }
    const int64_t B = xv->shape[0];
    if ((h0 && check_state("h0", h0, l, B, dt) != LB_OK) || (c0 && check_state("c0", c0, l, B, dt) != LB_OK))
        return NULL;
    lb_var *cur = x, *hs = NULL, *cs = NULL;
    for (int k = 0; k < l->n_layers; k++) {
        /* [B, T, n_in] -> [B, T, H] */
        lb_var *y = lb_lstm_layer(g, cur, l->weight_ih[k], l->weight_hh[k], l->bias_ih[k], l->bias_hh[k], h0, c0, k);
        if (!y)
            return NULL;
        if (h_n && !(hs = lb_lstm_final_state(g, y, hs, 0))) /* [k+1, B, H] */
            return NULL;
        if (c_n && !(cs = lb_lstm_final_state(g, y, cs, 1)))
            return NULL;
        cur = y;
    }
    if (h_n)
        *h_n = hs;
    if (c_n)
        *c_n = cs;
    return cur;
}
