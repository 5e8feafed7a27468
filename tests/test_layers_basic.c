/* The small layers: linear, layer norm, feed-forward, positional encodings
 * (sinusoidal, learned, rotary) and the position gather used by readout. */
#include <math.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "layers/ffn.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/positional.h"
#include "layers/attention.h"
#include "layers/params.h"
#include "support.h"

/* Fills every parameter of ps with U(low, high) (so biases and norm weights are not trivial). */
static const double *data64(const lb_tensor *t) { return lb_tensor_data(t); }

/* Gradcheck over [x, every parameter], with the layer applied after tanh(x). */
typedef lb_var *(*layer_fn)(lb_graph *g, lb_var *x, void *layer);
typedef struct check_case {
    layer_fn fn;
    void *layer;
} check_case;

static lb_var *check_fn(lb_graph *g, lb_var *const *leaves, void *user)
{
    check_case *c = user;
    return c->fn(g, lb_tanh(g, leaves[0]), c->layer);
}

static lb_status gradcheck_layer(layer_fn fn, void *layer, lb_var *x, lb_params *ps)
{
    lb_var *leaves[64];
    leaves[0] = x;
    for (int i = 0; i < ps->count; i++)
        leaves[1 + i] = ps->items[i];
    check_case c = {fn, layer};
    lb_gradcheck_leaf report[64];
    lb_status st = lb_gradcheck(check_fn, &c, 1 + ps->count, leaves, NULL, report);
    if (st != LB_OK) {
        fprintf(stderr, "\n  %s\n", lb_last_error());
        lb_gradcheck_print(stderr, 1 + ps->count, leaves, report);
    }
    return st;
}

/* ---- linear ---- */

static lb_var *linear_fn(lb_graph *g, lb_var *x, void *layer) { return lb_linear_forward(g, layer, x); }

static void test_linear(void)
{
    lb_params ps;
    lb_params_init(&ps);
    lb_rng rng;
    lb_rng_seed(&rng, 3);
    lb_linear l, nb;
    CU_ASSERT_EQUAL_FATAL(lb_linear_init(&l, &ps, "fc", 4, 3, 1, LB_FLOAT64, &rng), LB_OK);
    CU_ASSERT_EQUAL(ps.count, 2);
    CU_ASSERT_STRING_EQUAL(ps.items[0]->name, "fc.weight");
    CU_ASSERT_STRING_EQUAL(ps.items[1]->name, "fc.bias");
    CU_ASSERT_EQUAL(l.weight->value->shape[0], 4); /* stored [in, out] */
    CU_ASSERT_EQUAL(l.weight->value->shape[1], 3);
    /* Xavier bound sqrt(6 / 7); zero bias */
    double bound = sqrt(6.0 / 7.0), mx = 0;
    for (int i = 0; i < 12; i++)
        mx = fmax(mx, fabs(data64(l.weight->value)[i]));
    CU_ASSERT_TRUE(mx > 0 && mx <= bound);
    CU_ASSERT_EQUAL(lb_tensor_flat(l.bias->value, 0), 0.0);
    lb_test_randomize_params(&ps, 4, -1, 1);

    int64_t sx[3] = {2, 5, 4};
    lb_var *x = lb_param_new(lb_test_uniform(LB_FLOAT64, 3, sx, 5, -1, 1), "x");
    lb_graph *g = lb_graph_new();
    lb_var *y = lb_linear_forward(g, &l, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(y->value->ndim, 3);
    CU_ASSERT_EQUAL(y->value->shape[2], 3);
    double want[30];
    const double *px = data64(x->value), *pw = data64(l.weight->value), *pb = data64(l.bias->value);
    for (int r = 0; r < 10; r++)
        for (int o = 0; o < 3; o++) {
            want[r * 3 + o] = pb[o];
            for (int i = 0; i < 4; i++)
                want[r * 3 + o] += px[r * 4 + i] * pw[i * 3 + o];
        }
    LB_ASSERT_CLOSE(y->value, want, 1e-12, 0);
    /* A 1-dim input [in] gives [out]. */
    lb_var *row = lb_input(g, lb_tensor_slice(x->value, 0, 0, 1, 1), 0);
    int64_t s4[1] = {4};
    lb_var *v1 = lb_linear_forward(g, &l, lb_reshape(g, lb_slice(g, row, 1, 0, 1, 1), 1, s4));
    CU_ASSERT_PTR_NOT_NULL_FATAL(v1);
    CU_ASSERT_EQUAL(v1->value->ndim, 1);
    LB_ASSERT_CLOSE(v1->value, want, 1e-12, 0);
    /* Wrong input width: the message names the layer and both shapes. */
    int64_t sbad[2] = {2, 5};
    CU_ASSERT_PTR_NULL(lb_linear_forward(g, &l, lb_input(g, lb_tensor_zeros(LB_FLOAT64, 2, sbad), 0)));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'fc'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2, 5]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[4, 3]"));
    lb_graph_free(g);

    CU_ASSERT_EQUAL(gradcheck_layer(linear_fn, &l, x, &ps), LB_OK);

    /* Without bias: one parameter; a taken name is an error. */
    CU_ASSERT_EQUAL(lb_linear_init(&nb, &ps, "proj", 4, 2, 0, LB_FLOAT64, &rng), LB_OK);
    CU_ASSERT_PTR_NULL(nb.bias);
    CU_ASSERT_EQUAL(ps.count, 3);
    CU_ASSERT_EQUAL(lb_linear_init(&nb, &ps, "fc", 4, 2, 1, LB_FLOAT64, &rng), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_linear_init(&nb, &ps, "zero", 0, 2, 1, LB_FLOAT64, &rng), LB_ERR_VALUE);
    lb_param_free(x);
    lb_params_free(&ps);
}

/* ---- layer norm ---- */

static lb_var *norm_fn(lb_graph *g, lb_var *x, void *layer) { return lb_norm_forward(g, layer, x); }

static void test_norm(void)
{
    lb_params ps;
    lb_params_init(&ps);
    lb_norm n;
    CU_ASSERT_EQUAL_FATAL(lb_norm_init(&n, &ps, "ln", 5, LB_NORM_EPS, 1, LB_FLOAT64), LB_OK);
    CU_ASSERT_STRING_EQUAL(ps.items[0]->name, "ln.weight");
    CU_ASSERT_STRING_EQUAL(ps.items[1]->name, "ln.bias");
    CU_ASSERT_EQUAL(lb_tensor_flat(n.weight->value, 3), 1.0);
    CU_ASSERT_EQUAL(lb_tensor_flat(n.bias->value, 3), 0.0);
    lb_test_randomize_params(&ps, 8, 0.5, 1.5);
    int64_t sx[3] = {2, 3, 5};
    lb_var *x = lb_param_new(lb_test_uniform(LB_FLOAT64, 3, sx, 9, -2, 2), "x");
    lb_graph *g = lb_graph_new();
    lb_var *y = lb_norm_forward(g, &n, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    double want[30];
    const double *px = data64(x->value), *pw = data64(n.weight->value), *pb = data64(n.bias->value);
    for (int r = 0; r < 6; r++) {
        double mu = 0, var = 0;
        for (int j = 0; j < 5; j++)
            mu += px[r * 5 + j] / 5;
        for (int j = 0; j < 5; j++)
            var += (px[r * 5 + j] - mu) * (px[r * 5 + j] - mu) / 5;
        for (int j = 0; j < 5; j++)
            want[r * 5 + j] = (px[r * 5 + j] - mu) / sqrt(var + 1e-5) * pw[j] + pb[j];
    }
    LB_ASSERT_CLOSE(y->value, want, 1e-12, 0);
    lb_graph_free(g);
    CU_ASSERT_EQUAL(gradcheck_layer(norm_fn, &n, x, &ps), LB_OK);
    CU_ASSERT_EQUAL(lb_norm_init(&n, &ps, "bad", 0, 1e-5, 1, LB_FLOAT64), LB_ERR_VALUE);
    lb_param_free(x);
    lb_params_free(&ps);
}

/* ---- feed-forward ---- */

static lb_var *ffn_fn(lb_graph *g, lb_var *x, void *layer) { return lb_ffn_forward(g, layer, x, 0, NULL); }

static void test_ffn(void)
{
    lb_params ps;
    lb_params_init(&ps);
    lb_rng rng;
    lb_rng_seed(&rng, 1);
    lb_ffn f;
    CU_ASSERT_EQUAL_FATAL(lb_ffn_init(&f, &ps, "blk.ffn", 3, 7, 0.5, 1, LB_FLOAT64, &rng), LB_OK);
    const char *names[4] = {"blk.ffn.fc1.weight", "blk.ffn.fc1.bias", "blk.ffn.fc2.weight", "blk.ffn.fc2.bias"};
    CU_ASSERT_EQUAL_FATAL(ps.count, 4);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_STRING_EQUAL(ps.items[i]->name, names[i]);
    CU_ASSERT_EQUAL(lb_params_numel(&ps), 3 * 7 + 7 + 7 * 3 + 3);
    lb_test_randomize_params(&ps, 2, -1, 1);
    int64_t sx[3] = {2, 4, 3};
    lb_var *x = lb_param_new(lb_test_uniform(LB_FLOAT64, 3, sx, 3, -1, 1), "x");
    lb_graph *g = lb_graph_new();
    lb_var *y = lb_ffn_forward(g, &f, x, 0, NULL); /* evaluation: no dropout */
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    const double *px = data64(x->value), *w1 = data64(f.fc1.weight->value), *b1 = data64(f.fc1.bias->value);
    const double *w2 = data64(f.fc2.weight->value), *b2 = data64(f.fc2.bias->value);
    double want[24];
    for (int r = 0; r < 8; r++) {
        double hid[7];
        for (int j = 0; j < 7; j++) {
            double a = b1[j];
            for (int i = 0; i < 3; i++)
                a += px[r * 3 + i] * w1[i * 7 + j];
            hid[j] = 0.5 * a * (1 + erf(a / sqrt(2.0))); /* exact GELU */
        }
        for (int o = 0; o < 3; o++) {
            want[r * 3 + o] = b2[o];
            for (int j = 0; j < 7; j++)
                want[r * 3 + o] += hid[j] * w2[j * 3 + o];
        }
    }
    LB_ASSERT_CLOSE(y->value, want, 1e-12, 0);
    /* Training with dropout 0.5: every element is either 0 or twice the evaluation value. */
    lb_rng drop;
    lb_rng_seed(&drop, 11);
    lb_var *yd = lb_ffn_forward(g, &f, x, 1, &drop);
    CU_ASSERT_PTR_NOT_NULL_FATAL(yd);
    int zeros = 0, scaled = 0;
    for (int i = 0; i < 24; i++) {
        double v = lb_tensor_flat(yd->value, i);
        zeros += v == 0;
        scaled += fabs(v - 2 * want[i]) < 1e-12;
    }
    CU_ASSERT_EQUAL(zeros + scaled, 24);
    CU_ASSERT_TRUE(zeros > 0 && scaled > 0);
    lb_graph_free(g);
    CU_ASSERT_EQUAL(gradcheck_layer(ffn_fn, &f, x, &ps), LB_OK);
    CU_ASSERT_EQUAL(lb_ffn_init(&f, &ps, "bad", 3, 7, 1.0, 1, LB_FLOAT64, &rng), LB_ERR_VALUE);
    lb_param_free(x);
    lb_params_free(&ps);
}

/* ---- positional encodings ---- */

static void test_sinusoidal(void)
{
    lb_tensor *pe = lb_sinusoidal_table(LB_FLOAT64, 6, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pe);
    /* PE[t, 2i] = sin(t / 10000^(2i/D)), PE[t, 2i+1] = cos(t / 10000^(2i/D)), D = 5 */
    for (int t = 0; t < 6; t++)
        for (int c = 0; c < 5; c++) {
            int64_t idx[2] = {t, c};
            double angle = t / pow(10000.0, (double)(c / 2 * 2) / 5.0);
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(pe, idx), c % 2 ? cos(angle) : sin(angle), 1e-15);
        }
    int64_t i30[2] = {3, 0}, i31[2] = {3, 1}, i44[2] = {4, 4};
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(pe, i30), sin(3.0), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(pe, i31), cos(3.0), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(pe, i44), sin(4.0 / pow(10000.0, 0.8)), 1e-15);
    lb_tensor_free(pe);

    lb_params ps;
    lb_params_init(&ps);
    lb_positional p;
    CU_ASSERT_EQUAL_FATAL(lb_positional_init(&p, &ps, NULL, LB_POS_SINUSOIDAL, 0, 4, LB_FLOAT64, NULL), LB_OK);
    CU_ASSERT_EQUAL(ps.count, 0); /* no parameters */
    int64_t sx[3] = {2, 3, 4};
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT64, 3, sx, 1, -1, 1), 0);
    lb_var *y = lb_positional_add(g, &p, x);
    lb_tensor *table = lb_sinusoidal_table(LB_FLOAT64, 3, 4);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 12; i++)
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(y->value, b * 12 + i),
                                   lb_tensor_flat(x->value, b * 12 + i) + lb_tensor_flat(table, i), 1e-15);
    lb_tensor_free(table);
    /* none returns its input unchanged */
    lb_positional none;
    CU_ASSERT_EQUAL(lb_positional_init(&none, &ps, NULL, LB_POS_NONE, 0, 4, LB_FLOAT64, NULL), LB_OK);
    CU_ASSERT_PTR_EQUAL(lb_positional_add(g, &none, x), x);
    lb_graph_free(g);
    lb_params_free(&ps);
}

static void test_learned_positions(void)
{
    lb_params ps;
    lb_params_init(&ps);
    lb_rng rng;
    lb_rng_seed(&rng, 2);
    lb_positional p;
    CU_ASSERT_EQUAL_FATAL(lb_positional_init(&p, &ps, NULL, LB_POS_LEARNED, 5, 3, LB_FLOAT64, &rng), LB_OK);
    CU_ASSERT_EQUAL_FATAL(ps.count, 1);
    CU_ASSERT_STRING_EQUAL(ps.items[0]->name, "pos_embedding");
    CU_ASSERT_EQUAL(lb_params_numel(&ps), 15);
    int64_t sx[3] = {2, 4, 3};
    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT64, 3, sx, 1, -1, 1), 1);
    lb_var *y = lb_positional_add(g, &p, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 12; i++)
            CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(y->value, b * 12 + i),
                                   lb_tensor_flat(x->value, b * 12 + i) + lb_tensor_flat(p.embedding->value, i), 1e-15);
    /* The gradient reaches rows 0..T-1 (summed over the batch) and not row 4. */
    CU_ASSERT_EQUAL(lb_backward(g, lb_sum(g, y), NULL), LB_OK);
    for (int i = 0; i < 15; i++)
        CU_ASSERT_EQUAL(lb_tensor_flat(p.embedding->grad, i), i < 12 ? 2.0 : 0.0);
    lb_graph_reset(g);
    /* T > max_seq_len: an error that names both and says what to do. */
    int64_t sl[3] = {1, 6, 3};
    CU_ASSERT_PTR_NULL(lb_positional_add(g, &p, lb_input(g, lb_tensor_zeros(LB_FLOAT64, 3, sl), 0)));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "max_seq_len = 5"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "T = 6"));
    lb_graph_free(g);
    CU_ASSERT_EQUAL(lb_positional_init(&p, &ps, NULL, LB_POS_LEARNED, 0, 3, LB_FLOAT64, &rng), LB_ERR_VALUE);
    lb_params_free(&ps);
}

typedef struct rotary_case {
    const int32_t *positions;
} rotary_case;

static lb_var *rotary_fn(lb_graph *g, lb_var *const *leaves, void *user)
{
    rotary_case *c = user;
    return lb_rotary(g, lb_tanh(g, leaves[0]), c->positions, 10000.0);
}

static void test_rotary(void)
{
    lb_graph *g = lb_graph_new();
    /* d = 2: a plain rotation of (x0, x1) by the angle = position. */
    int64_t s2[3] = {1, 3, 2};
    double v2[6] = {1, 0, 0.5, -2, 3, 1};
    lb_var *x2 = lb_input(g, lb_tensor_from_doubles(LB_FLOAT64, 3, s2, v2), 0);
    lb_var *r2 = lb_rotary(g, x2, NULL, 10000.0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r2);
    for (int p = 0; p < 3; p++) {
        double a = v2[2 * p], b = v2[2 * p + 1];
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(r2->value, 2 * p), a * cos(p) - b * sin(p), 1e-14);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(r2->value, 2 * p + 1), b * cos(p) + a * sin(p), 1e-14);
    }
    /* Relative: q at m and k at n give the same dot product as at m + s and n + s. */
    int64_t s4[3] = {2, 1, 4};
    lb_var *q = lb_input(g, lb_test_uniform(LB_FLOAT64, 3, s4, 5, -1, 1), 0);
    lb_var *k = lb_input(g, lb_test_uniform(LB_FLOAT64, 3, s4, 6, -1, 1), 0);
    int32_t pq[2] = {7, 2}, pk[2] = {3, 9}, pq2[2] = {12, 20}, pk2[2] = {8, 27};
    lb_var *d1 = lb_matmul_t(g, lb_rotary(g, q, pq, 10000.0), 0, lb_rotary(g, k, pk, 10000.0), 1);
    lb_var *d2 = lb_matmul_t(g, lb_rotary(g, q, pq2, 10000.0), 0, lb_rotary(g, k, pk2, 10000.0), 1);
    lb_var *d0 = lb_matmul_t(g, q, 0, k, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d2);
    LB_ASSERT_TENSORS_CLOSE(d1->value, d2->value, 1e-12, 0);
    CU_ASSERT_TRUE(fabs(lb_tensor_flat(d1->value, 0) - lb_tensor_flat(d0->value, 0)) > 1e-3); /* it did rotate */
    /* Explicit positions 0..P-1 equal the default; middle (head) dims share the positions. */
    int64_t s5[4] = {2, 3, 4, 6};
    lb_var *x = lb_input(g, lb_test_uniform(LB_FLOAT64, 4, s5, 7, -1, 1), 0);
    int32_t seq[8] = {0, 1, 2, 3, 0, 1, 2, 3};
    LB_ASSERT_TENSORS_CLOSE(lb_rotary(g, x, NULL, 10000.0)->value, lb_rotary(g, x, seq, 10000.0)->value, 0, 0);
    /* Odd width is an error. */
    int64_t s3[3] = {1, 2, 3};
    CU_ASSERT_PTR_NULL(lb_rotary(g, lb_input(g, lb_tensor_zeros(LB_FLOAT64, 3, s3), 0), NULL, 10000.0));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_SHAPE);
    lb_graph_free(g);

    int32_t pos[6] = {4, 0, 2, 1, 5, 3};
    lb_var *leaf = lb_param_new(lb_test_uniform(LB_FLOAT64, 4, (int64_t[4]){2, 2, 3, 4}, 8, -1, 1), "x");
    rotary_case c = {pos}, c0 = {NULL};
    CU_ASSERT_EQUAL(lb_gradcheck(rotary_fn, &c, 1, &leaf, NULL, NULL), LB_OK);
    CU_ASSERT_EQUAL(lb_gradcheck(rotary_fn, &c0, 1, &leaf, NULL, NULL), LB_OK);
    lb_param_free(leaf);
}

/* ---- gathering positions ---- */

static lb_var *gather_fn(lb_graph *g, lb_var *const *leaves, void *user)
{
    return lb_gather_positions(g, lb_tanh(g, leaves[0]), user);
}

static void test_gather_positions(void)
{
    int64_t sx[3] = {3, 4, 2};
    lb_var *x = lb_param_new(lb_test_uniform(LB_FLOAT64, 3, sx, 1, -1, 1), "x");
    int32_t pos[6] = {3, 0, 1, 1, 2, 3}; /* [B = 3, P = 2], a repeated position in item 1 */
    lb_attn_queries q = {pos, 2};
    lb_graph *g = lb_graph_new();
    lb_var *y = lb_gather_positions(g, x, &q);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_EQUAL(y->value->shape[1], 2);
    for (int b = 0; b < 3; b++)
        for (int p = 0; p < 2; p++)
            for (int d = 0; d < 2; d++)
                CU_ASSERT_EQUAL(lb_tensor_flat(y->value, (b * 2 + p) * 2 + d),
                                lb_tensor_flat(x->value, (b * 4 + pos[b * 2 + p]) * 2 + d));
    int32_t bad[6] = {0, 0, 0, 4, 0, 0};
    lb_attn_queries qb = {bad, 2};
    CU_ASSERT_PTR_NULL(lb_gather_positions(g, x, &qb));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[1, 1] = 4"));
    lb_graph_free(g);
    CU_ASSERT_EQUAL(lb_gradcheck(gather_fn, &q, 1, &x, NULL, NULL), LB_OK);
    lb_param_free(x);
}

/* Parameters beyond the machine's memory (RAM and swap) are refused before any
 * allocation, with LB_ERR_MEMORY naming the parameter and the sizes; the list keeps what
 * it had and takes more afterwards. */
static void test_params_beyond_memory(void)
{
    struct sysinfo si;
    CU_ASSERT_EQUAL_FATAL(sysinfo(&si), 0);
    double mem = ((double)si.totalram + (double)si.totalswap) * (double)si.mem_unit;
    lb_params ps;
    lb_params_init(&ps);
    int64_t small[2] = {4, 4}, huge[2] = {(int64_t)(mem / 4 / 1024 * 1.5) + 1, 1024}; /* 1.5 x the memory */
    CU_ASSERT_PTR_NOT_NULL(lb_params_add(&ps, "m", "w", LB_FLOAT32, 2, small));
    CU_ASSERT_PTR_NULL(lb_params_add(&ps, "m", "big", LB_FLOAT32, 2, huge));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_MEMORY);
    CU_ASSERT_TRUE(lb_test_error_has("'m.big'") && lb_test_error_has("more than this machine's memory"));
    CU_ASSERT_EQUAL(ps.count, 1);
    CU_ASSERT_PTR_NOT_NULL(lb_params_add(&ps, "m", "b", LB_FLOAT32, 1, small));
    CU_ASSERT_EQUAL(ps.count, 2);
    lb_params_free(&ps);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"linear: names, [in, out] storage, values, gradcheck, errors", test_linear},
        {"layer norm: names, values, gradcheck", test_norm},
        {"feed-forward: names, values with exact GELU, dropout, gradcheck", test_ffn},
        {"sinusoidal positions: Vaswani table, added to x; none is the identity", test_sinusoidal},
        {"learned positions: values, gradient rows, T > max_seq_len error", test_learned_positions},
        {"rotary: rotation values, relative-position property, gradcheck", test_rotary},
        {"gather positions: values, range error, gradcheck", test_gather_positions},
        {"parameters beyond the machine's memory: refused before allocation", test_params_beyond_memory},
        {NULL, NULL},
    };
    return lb_test_main("layers_basic", cases);
}
