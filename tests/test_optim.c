/* Optimizers, clipping and schedules against PyTorch traces (tests/fixtures/optim.h5,
 * made by tests/fixtures/make_optim_fixtures.py), plus edge cases torch never sees. */
#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/clip.h"
#include "optim/optim.h"
#include "optim/schedule.h"
#include "support.h"

enum { STEPS = 5, SKIP_STEP = 2 };

/* ---- fixture access (HDF5 C API, everything read as float64) ---- */

static hid_t fixture_open(void)
{
    hid_t f = H5Fopen(lb_fixture_path("optim.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(f >= 0);
    return f;
}

/* The dataset at `path` as a malloc'd array of doubles; *n receives its size. */
static double *fixture_read(hid_t f, const char *path, int64_t *n)
{
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) {
        fprintf(stderr, "\n  fixture dataset %s missing\n", path);
        CU_FAIL_FATAL("fixture dataset missing");
    }
    hid_t space = H5Dget_space(d);
    int64_t count = (int64_t)H5Sget_simple_extent_npoints(space);
    double *out = malloc((size_t)(count > 0 ? count : 1) * sizeof *out);
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT_FATAL(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0);
    H5Sclose(space);
    H5Dclose(d);
    if (n)
        *n = count;
    return out;
}

static double fixture_scalar(hid_t f, const char *path)
{
    double *v = fixture_read(f, path, NULL);
    double x = v[0];
    free(v);
    return x;
}

static double fixture_attr(hid_t f, const char *object, const char *name)
{
    double x = NAN;
    hid_t a = H5Aopen_by_name(f, object, name, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT_FATAL(a >= 0);
    CU_ASSERT_FATAL(H5Aread(a, H5T_NATIVE_DOUBLE, &x) >= 0);
    H5Aclose(a);
    return x;
}

/* Number of links (datasets) in a group. */
static int64_t fixture_group_size(hid_t f, const char *path)
{
    H5G_info_t info;
    hid_t g = H5Gopen2(f, path, H5P_DEFAULT);
    CU_ASSERT_FATAL(g >= 0);
    H5Gget_info(g, &info);
    H5Gclose(g);
    return (int64_t)info.nlinks;
}

/* ---- the two parameters of every trace: w [2, 3] and b [4] ---- */

static const int64_t W_SHAPE[2] = {2, 3}, B_SHAPE[1] = {4};
enum { W_N = 6, B_N = 4 };

typedef struct trace_inputs {
    double *init_w, *init_b;
    double *grad_w, *grad_b;       /* [STEPS, 6], [STEPS, 4] */
    double *present_w, *present_b; /* [STEPS] */
} trace_inputs;

static trace_inputs inputs_read(hid_t f)
{
    trace_inputs in;
    in.init_w = fixture_read(f, "params/init/w", NULL);
    in.init_b = fixture_read(f, "params/init/b", NULL);
    in.grad_w = fixture_read(f, "grads/w", NULL);
    in.grad_b = fixture_read(f, "grads/b", NULL);
    in.present_w = fixture_read(f, "grads/w_present", NULL);
    in.present_b = fixture_read(f, "grads/b_present", NULL);
    return in;
}

static void inputs_free(trace_inputs *in)
{
    free(in->init_w);
    free(in->init_b);
    free(in->grad_w);
    free(in->grad_b);
    free(in->present_w);
    free(in->present_b);
}

/* Gives `p` the fixture's gradient for step s, or none. */
static void set_grad(lb_var *p, int present, const double *values)
{
    lb_param_zero_grad(p);
    if (present)
        p->grad = lb_tensor_from_doubles(p->value->dtype, p->value->ndim, p->value->shape, values);
}

static void feed_step(lb_var *w, lb_var *b, const trace_inputs *in, int s)
{
    set_grad(w, in->present_w[s] != 0, in->grad_w + s * W_N);
    set_grad(b, in->present_b[s] != 0, in->grad_b + s * B_N);
}

static lb_optim_config fixture_config(hid_t f, const char *group)
{
    static const lb_optim_kind kinds[3] = {LB_OPTIM_SGD, LB_OPTIM_ADAM, LB_OPTIM_ADAMW};
    int id = (int)fixture_attr(f, group, "kind_id");
    CU_ASSERT_FATAL(id >= 0 && id < 3);
    lb_optim_config c = lb_optim_defaults(kinds[id]);
    c.momentum = fixture_attr(f, group, "momentum");
    c.dampening = fixture_attr(f, group, "dampening");
    c.nesterov = fixture_attr(f, group, "nesterov") != 0;
    c.weight_decay = fixture_attr(f, group, "weight_decay");
    if (c.kind != LB_OPTIM_SGD) {
        c.beta1 = fixture_attr(f, group, "beta1");
        c.beta2 = fixture_attr(f, group, "beta2");
        c.eps = fixture_attr(f, group, "eps");
    }
    return c;
}

/* Bitwise snapshot of a tensor's elements. */
static void *snapshot(const lb_tensor *t)
{
    size_t bytes = (size_t)lb_tensor_numel(t) * lb_dtype_size(t->dtype);
    void *copy = malloc(bytes ? bytes : 1);
    memcpy(copy, lb_tensor_data(t), bytes);
    return copy;
}

static int same_bits(const lb_tensor *t, const void *snap)
{
    return memcmp(lb_tensor_data(t), snap, (size_t)lb_tensor_numel(t) * lb_dtype_size(t->dtype)) == 0;
}

/* Runs fixture case `name` in `dtype`, comparing the parameters after every step and
 * the state after the last one; checks that "b", which has no gradient at step
 * SKIP_STEP, is left alone then (value, buffers and step count bit-for-bit). */
static void run_case(hid_t f, const trace_inputs *in, const char *name, lb_dtype dtype, double atol, double rtol)
{
    char group[128], path[256];
    snprintf(group, sizeof group, "optim/%s", name);
    lb_optim_config cfg = fixture_config(f, group);
    snprintf(path, sizeof path, "%s/lr", group);
    double *lr = fixture_read(f, path, NULL);
    snprintf(path, sizeof path, "%s/w", group);
    double *want_w = fixture_read(f, path, NULL);
    snprintf(path, sizeof path, "%s/b", group);
    double *want_b = fixture_read(f, path, NULL);

    lb_var *w = lb_param_new(lb_tensor_from_doubles(dtype, 2, W_SHAPE, in->init_w), "w");
    lb_var *b = lb_param_new(lb_tensor_from_doubles(dtype, 1, B_SHAPE, in->init_b), "b");
    lb_var *params[2] = {w, b};
    cfg.lr = lr[0];
    lb_optim *opt = lb_optim_new(&cfg, params, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(opt);
    for (int s = 0; s < STEPS; s++) {
        CU_ASSERT_EQUAL(lb_optim_set_lr(opt, lr[s]), LB_OK);
        feed_step(w, b, in, s);
        void *snaps[4] = {NULL, NULL, NULL, NULL};
        int n_snaps = 0;
        if (s == SKIP_STEP) {
            CU_ASSERT_PTR_NULL(b->grad);
            snaps[n_snaps++] = snapshot(b->value);
            for (int i = 0; i < lb_optim_state_count(opt); i++)
                if (strstr(lb_optim_state_name(opt, i), ".b"))
                    snaps[n_snaps++] = snapshot(lb_optim_state_tensor(opt, i));
        }
        CU_ASSERT_EQUAL_FATAL(lb_optim_step(opt), LB_OK);
        if (s == SKIP_STEP) {
            int k = 0;
            CU_ASSERT_TRUE(same_bits(b->value, snaps[k++]));
            for (int i = 0; i < lb_optim_state_count(opt); i++)
                if (strstr(lb_optim_state_name(opt, i), ".b"))
                    CU_ASSERT_TRUE(same_bits(lb_optim_state_tensor(opt, i), snaps[k++]));
            CU_ASSERT_EQUAL(k, n_snaps);
            CU_ASSERT_EQUAL(lb_tensor_flat(lb_optim_state_find(opt, "step.b"), 0), 2.0);
            CU_ASSERT_EQUAL(lb_tensor_flat(lb_optim_state_find(opt, "step.w"), 0), 3.0);
            for (int i = 0; i < n_snaps; i++)
                free(snaps[i]);
        }
        if (!lb_check_close(w->value, want_w + s * W_N, atol, rtol, name) ||
            !lb_check_close(b->value, want_b + s * B_N, atol, rtol, name)) {
            fprintf(stderr, "  (%s, %s, after step %d)\n", name, lb_dtype_name(dtype), s + 1);
            CU_FAIL("parameter trace differs from torch.optim");
        }
    }
    /* Final state: the same tensors, by name, as torch's optimizer.state. */
    snprintf(path, sizeof path, "%s/state", group);
    CU_ASSERT_EQUAL(lb_optim_state_count(opt), fixture_group_size(f, path));
    for (int i = 0; i < lb_optim_state_count(opt); i++) {
        const char *sname = lb_optim_state_name(opt, i);
        const lb_tensor *t = lb_optim_state_tensor(opt, i);
        snprintf(path, sizeof path, "%s/state/%s", group, sname);
        int64_t n;
        double *want = fixture_read(f, path, &n);
        CU_ASSERT_EQUAL(n, lb_tensor_numel(t));
        CU_ASSERT_EQUAL(t->dtype, strncmp(sname, "step.", 5) == 0 ? LB_FLOAT64 : dtype);
        if (!lb_check_close(t, want, atol, rtol, sname)) {
            fprintf(stderr, "  (%s, %s)\n", name, lb_dtype_name(dtype));
            CU_FAIL("optimizer state differs from torch.optim");
        }
        free(want);
    }
    CU_ASSERT_EQUAL(lb_tensor_flat(lb_optim_state_find(opt, "step.w"), 0), 5.0);
    CU_ASSERT_EQUAL(lb_tensor_flat(lb_optim_state_find(opt, "step.b"), 0), 4.0);
    lb_optim_free(opt);
    lb_param_free(w);
    lb_param_free(b);
    free(lr);
    free(want_w);
    free(want_b);
}

static void run_cases(const char *const *names, lb_dtype dtype, double atol, double rtol)
{
    hid_t f = fixture_open();
    trace_inputs in = inputs_read(f);
    for (const char *const *n = names; *n; n++)
        run_case(f, &in, *n, dtype, atol, rtol);
    inputs_free(&in);
    H5Fclose(f);
}

static const char *const SGD_CASES[] = {"sgd_plain", "sgd_nesterov_wd", "sgd_momentum_dampening", NULL};
static const char *const ADAM_CASES[] = {"adam_default", "adam_wd", NULL};
static const char *const ADAMW_CASES[] = {"adamw_wd", NULL};

static void test_sgd_matches_torch(void) { run_cases(SGD_CASES, LB_FLOAT64, 1e-15, 1e-12); }
static void test_adam_matches_torch(void) { run_cases(ADAM_CASES, LB_FLOAT64, 1e-15, 1e-12); }
static void test_adamw_matches_torch(void) { run_cases(ADAMW_CASES, LB_FLOAT64, 1e-15, 1e-12); }

static void test_float32_params(void)
{
    /* float32 parameters keep float32 state and follow the float64 trace to
     * float32 rounding. */
    run_cases(SGD_CASES, LB_FLOAT32, 1e-6, 1e-5);
    run_cases(ADAM_CASES, LB_FLOAT32, 1e-6, 1e-5);
    run_cases(ADAMW_CASES, LB_FLOAT32, 1e-6, 1e-5);
}

/* Adam by hand on one scalar: eps sits outside sqrt(v_hat); AdamW decays by lr*wd. */
static void test_adam_rules_by_hand(void)
{
    int64_t s1[1] = {1};
    double p0 = 2.0, g = 1e-4, lr = 0.1, wd = 0.5;
    for (int k = 0; k < 2; k++) {
        lb_optim_config c = lb_optim_defaults(k ? LB_OPTIM_ADAMW : LB_OPTIM_ADAM);
        c.lr = lr;
        c.eps = 1e-3;
        c.weight_decay = k ? wd : 0.0;
        lb_var *p = lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 1, s1, &p0), "p");
        lb_optim *opt = lb_optim_new(&c, &p, 1);
        p->grad = lb_tensor_from_doubles(LB_FLOAT64, 1, s1, &g);
        CU_ASSERT_EQUAL(lb_optim_step(opt), LB_OK);
        /* Step 1: m_hat = g, v_hat = g^2, so p -= lr * g / (|g| + eps). */
        double decayed = k ? p0 * (1 - lr * wd) : p0;
        double want = decayed - lr * g / (fabs(g) + 1e-3);
        CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(p->value, 0), want, 1e-15);
        /* eps inside the root would give lr * g / sqrt(g^2 + eps): far from this. */
        CU_ASSERT_TRUE(fabs(lb_tensor_flat(p->value, 0) - (decayed - lr * g / sqrt(g * g + 1e-3))) > 1e-4);
        lb_optim_free(opt);
        lb_param_free(p);
    }
}

/* ---- checkpoints: state enumeration and restore ---- */

static void test_state_enumeration_and_restore(void)
{
    hid_t f = fixture_open();
    trace_inputs in = inputs_read(f);
    H5Fclose(f);
    for (int k = 0; k < 2; k++) {
        lb_optim_config cfg = lb_optim_defaults(k ? LB_OPTIM_ADAMW : LB_OPTIM_SGD);
        cfg.lr = 0.05;
        if (!k) {
            cfg.momentum = 0.9;
            cfg.nesterov = 1;
        }
        lb_var *w = lb_param_new(lb_tensor_from_doubles(LB_FLOAT32, 2, W_SHAPE, in.init_w), "layer.w");
        lb_var *b = lb_param_new(lb_tensor_from_doubles(LB_FLOAT32, 1, B_SHAPE, in.init_b), "layer.b");
        lb_var *params[2] = {w, b};
        lb_optim *a = lb_optim_new(&cfg, params, 2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a);
        /* Names and order. */
        if (!k) {
            const char *want[4] = {"step.layer.w", "momentum_buffer.layer.w", "step.layer.b",
                                   "momentum_buffer.layer.b"};
            CU_ASSERT_EQUAL_FATAL(lb_optim_state_count(a), 4);
            for (int i = 0; i < 4; i++)
                CU_ASSERT_STRING_EQUAL(lb_optim_state_name(a, i), want[i]);
        } else {
            const char *want[6] = {"step.layer.w", "exp_avg.layer.w", "exp_avg_sq.layer.w",
                                   "step.layer.b", "exp_avg.layer.b", "exp_avg_sq.layer.b"};
            CU_ASSERT_EQUAL_FATAL(lb_optim_state_count(a), 6);
            for (int i = 0; i < 6; i++)
                CU_ASSERT_STRING_EQUAL(lb_optim_state_name(a, i), want[i]);
            const lb_tensor *m = lb_optim_state_find(a, "exp_avg.layer.w");
            CU_ASSERT_PTR_EQUAL(m, lb_optim_state_tensor(a, 1));
            CU_ASSERT_TRUE(lb_tensor_same_shape(m, w->value));
            CU_ASSERT_EQUAL(m->dtype, LB_FLOAT32);
        }
        const lb_tensor *st = lb_optim_state_find(a, "step.layer.b");
        CU_ASSERT_EQUAL(st->dtype, LB_FLOAT64);
        CU_ASSERT_EQUAL(st->ndim, 0);
        CU_ASSERT_PTR_NULL(lb_optim_state_name(a, -1));
        CU_ASSERT_PTR_NULL(lb_optim_state_tensor(a, lb_optim_state_count(a)));
        CU_ASSERT_PTR_NULL(lb_optim_state_find(a, "exp_avg.nothing"));

        for (int s = 0; s < 3; s++) {
            feed_step(w, b, &in, s);
            CU_ASSERT_EQUAL(lb_optim_step(a), LB_OK);
        }
        /* Save: parameter values and every state tensor, by name. */
        int n_state = lb_optim_state_count(a);
        lb_tensor **saved = calloc((size_t)n_state, sizeof *saved);
        for (int i = 0; i < n_state; i++)
            saved[i] = lb_tensor_copy(lb_optim_state_tensor(a, i), lb_optim_state_tensor(a, i)->dtype);
        lb_var *w2 = lb_param_new(lb_tensor_copy(w->value, LB_FLOAT32), "layer.w");
        lb_var *b2 = lb_param_new(lb_tensor_copy(b->value, LB_FLOAT32), "layer.b");
        lb_var *params2[2] = {w2, b2};
        lb_optim *r = lb_optim_new(&cfg, params2, 2);
        for (int i = 0; i < n_state; i++)
            CU_ASSERT_EQUAL(lb_tensor_copy_into(lb_optim_state_find(r, lb_optim_state_name(a, i)), saved[i]), LB_OK);
        /* Both continue with the same gradients: bit-for-bit the same. */
        for (int s = 3; s < STEPS; s++) {
            feed_step(w, b, &in, s);
            feed_step(w2, b2, &in, s);
            CU_ASSERT_EQUAL(lb_optim_step(a), LB_OK);
            CU_ASSERT_EQUAL(lb_optim_step(r), LB_OK);
        }
        void *sw = snapshot(w->value), *sb = snapshot(b->value);
        CU_ASSERT_TRUE(same_bits(w2->value, sw));
        CU_ASSERT_TRUE(same_bits(b2->value, sb));
        free(sw);
        free(sb);
        for (int i = 0; i < n_state; i++) {
            void *snap = snapshot(lb_optim_state_tensor(a, i));
            CU_ASSERT_TRUE(same_bits(lb_optim_state_tensor(r, i), snap));
            free(snap);
            lb_tensor_free(saved[i]);
        }
        free(saved);
        /* A corrupt step count is refused before anything moves. */
        *(double *)lb_tensor_data(lb_optim_state_find(r, "step.layer.b")) = 2.5;
        void *before = snapshot(w2->value);
        CU_ASSERT_EQUAL(lb_optim_step(r), LB_ERR_STATE);
        CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "step.layer.b"));
        CU_ASSERT_TRUE(same_bits(w2->value, before));
        free(before);
        /* zero_grad drops every gradient. */
        lb_optim_zero_grad(r);
        CU_ASSERT_PTR_NULL(w2->grad);
        CU_ASSERT_PTR_NULL(b2->grad);
        lb_optim_free(a);
        lb_optim_free(r);
        lb_param_free(w);
        lb_param_free(b);
        lb_param_free(w2);
        lb_param_free(b2);
    }
    inputs_free(&in);
}

/* ---- configuration and argument errors ---- */

static void test_config_and_argument_errors(void)
{
    int64_t s3[1] = {3}, s2[1] = {2};
    double v[3] = {1, 2, 3};
    lb_var *p = lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 1, s3, v), "p");
    lb_var *q = lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 1, s3, v), "q");
    lb_var *params[2] = {p, q};

    lb_optim_config c = lb_optim_defaults(LB_OPTIM_ADAM);
    CU_ASSERT_EQUAL(c.lr, 1e-3);
    CU_ASSERT_EQUAL(c.beta2, 0.999);
    CU_ASSERT_EQUAL(c.eps, 1e-8);
    CU_ASSERT_EQUAL(lb_optim_defaults(LB_OPTIM_ADAMW).weight_decay, 1e-2);
    CU_ASSERT_EQUAL(lb_optim_config_check(&c), LB_OK);
    c.lr = -1;
    CU_ASSERT_PTR_NULL(lb_optim_new(&c, params, 2));
    CU_ASSERT_EQUAL(lb_last_status(), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "lr"));
    c = lb_optim_defaults(LB_OPTIM_ADAM);
    c.beta1 = 1.0;
    CU_ASSERT_EQUAL(lb_optim_config_check(&c), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "beta1"));
    c = lb_optim_defaults(LB_OPTIM_ADAMW);
    c.eps = NAN;
    CU_ASSERT_EQUAL(lb_optim_config_check(&c), LB_ERR_VALUE);
    c = lb_optim_defaults(LB_OPTIM_SGD);
    c.nesterov = 1;
    CU_ASSERT_EQUAL(lb_optim_config_check(&c), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "nesterov"));
    c.momentum = 0.9;
    c.dampening = 0.1;
    CU_ASSERT_EQUAL(lb_optim_config_check(&c), LB_ERR_VALUE);
    c.dampening = 0;
    CU_ASSERT_EQUAL(lb_optim_config_check(&c), LB_OK);

    /* Parameters: repeated, same-named, unnamed. */
    lb_var *twice[2] = {p, p};
    CU_ASSERT_PTR_NULL(lb_optim_new(&c, twice, 2));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "twice"));
    lb_var *same = lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 1, s3, v), "p");
    lb_var *dup[2] = {p, same};
    CU_ASSERT_PTR_NULL(lb_optim_new(&c, dup, 2));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'p'"));
    lb_var *anon = lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 1, s3, v), NULL);
    CU_ASSERT_PTR_NULL(lb_optim_new(&c, &anon, 1));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "no name"));
    lb_param_free(same);
    lb_param_free(anon);

    /* No parameters is fine. */
    lb_optim *empty = lb_optim_new(&c, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL(empty);
    CU_ASSERT_EQUAL(lb_optim_step(empty), LB_OK);
    CU_ASSERT_EQUAL(lb_optim_state_count(empty), 0);
    lb_optim_free(empty);

    /* A bad gradient anywhere stops the whole step before any parameter moves. */
    lb_optim *opt = lb_optim_new(&c, params, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(opt);
    CU_ASSERT_EQUAL(lb_optim_param_count(opt), 2);
    p->grad = lb_tensor_from_doubles(LB_FLOAT64, 1, s3, v);
    q->grad = lb_tensor_zeros(LB_FLOAT64, 1, s2);
    CU_ASSERT_EQUAL(lb_optim_step(opt), LB_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'q'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "[2]"));
    LB_ASSERT_CLOSE(p->value, v, 0, 0);
    CU_ASSERT_EQUAL(lb_tensor_flat(lb_optim_state_find(opt, "step.p"), 0), 0.0);
    lb_param_zero_grad(q);
    q->grad = lb_tensor_zeros(LB_FLOAT32, 1, s3);
    CU_ASSERT_EQUAL(lb_optim_step(opt), LB_ERR_DTYPE);
    LB_ASSERT_CLOSE(p->value, v, 0, 0);

    /* Learning rate. */
    CU_ASSERT_EQUAL(lb_optim_set_lr(opt, 0.25), LB_OK);
    CU_ASSERT_EQUAL(lb_optim_lr(opt), 0.25);
    CU_ASSERT_EQUAL(lb_optim_set_lr(opt, -0.1), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_optim_set_lr(opt, INFINITY), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_optim_get_config(opt)->lr, 0.25);
    lb_optim_free(opt);
    lb_optim_free(NULL);
    lb_param_free(p);
    lb_param_free(q);
}

static void test_parse_names(void)
{
    lb_optim_kind k = LB_OPTIM_SGD;
    CU_ASSERT_EQUAL(lb_optim_kind_parse("adam", &k), LB_OK);
    CU_ASSERT_EQUAL(k, LB_OPTIM_ADAM);
    CU_ASSERT_EQUAL(lb_optim_kind_parse("AdamW", &k), LB_OK);
    CU_ASSERT_EQUAL(k, LB_OPTIM_ADAMW);
    CU_ASSERT_EQUAL(lb_optim_kind_parse("sgd", &k), LB_OK);
    CU_ASSERT_EQUAL(k, LB_OPTIM_SGD);
    CU_ASSERT_EQUAL(lb_optim_kind_parse("adagrad", &k), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'adagrad'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "sgd, adam, adamw"));
    CU_ASSERT_EQUAL(lb_optim_kind_parse(NULL, &k), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_optim_kind_parse("adam ", &k), LB_ERR_VALUE);
    CU_ASSERT_STRING_EQUAL(lb_optim_kind_name(LB_OPTIM_ADAMW), "adamw");
    CU_ASSERT_STRING_EQUAL(lb_optim_kind_name((lb_optim_kind)7), "unknown");

    lb_schedule_kind s = LB_SCHEDULE_CONSTANT;
    CU_ASSERT_EQUAL(lb_schedule_kind_parse("cosine", &s), LB_OK);
    CU_ASSERT_EQUAL(s, LB_SCHEDULE_COSINE);
    CU_ASSERT_EQUAL(lb_schedule_kind_parse("Step", &s), LB_OK);
    CU_ASSERT_EQUAL(s, LB_SCHEDULE_STEP);
    CU_ASSERT_EQUAL(lb_schedule_kind_parse("constant", &s), LB_OK);
    CU_ASSERT_EQUAL(s, LB_SCHEDULE_CONSTANT);
    CU_ASSERT_EQUAL(lb_schedule_kind_parse("onecycle", &s), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'onecycle'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "constant, cosine, step"));
    CU_ASSERT_STRING_EQUAL(lb_schedule_kind_name(LB_SCHEDULE_COSINE), "cosine");
}

/* ---- clipping ---- */

static void test_clip_matches_torch(void)
{
    hid_t f = fixture_open();
    const char *cases[2] = {"clip/clipped", "clip/unclipped"};
    for (int k = 0; k < 2; k++) {
        char path[128];
        snprintf(path, sizeof path, "%s/grad_in.w", cases[k]);
        double *in_w = fixture_read(f, path, NULL);
        snprintf(path, sizeof path, "%s/grad_in.b", cases[k]);
        double *in_b = fixture_read(f, path, NULL);
        snprintf(path, sizeof path, "%s/grad_out.w", cases[k]);
        double *out_w = fixture_read(f, path, NULL);
        snprintf(path, sizeof path, "%s/grad_out.b", cases[k]);
        double *out_b = fixture_read(f, path, NULL);
        snprintf(path, sizeof path, "%s/total_norm", cases[k]);
        double want_norm = fixture_scalar(f, path);
        double max_norm = fixture_attr(f, cases[k], "max_norm");

        int64_t s3[1] = {3};
        lb_var *w = lb_param_new(lb_tensor_zeros(LB_FLOAT64, 2, W_SHAPE), "w");
        lb_var *b = lb_param_new(lb_tensor_zeros(LB_FLOAT64, 1, B_SHAPE), "b");
        lb_var *c = lb_param_new(lb_tensor_zeros(LB_FLOAT64, 1, s3), "c"); /* no gradient */
        w->grad = lb_tensor_from_doubles(LB_FLOAT64, 2, W_SHAPE, in_w);
        b->grad = lb_tensor_from_doubles(LB_FLOAT64, 1, B_SHAPE, in_b);
        lb_var *params[3] = {w, b, c};
        double norm = -1, plain = -1;
        CU_ASSERT_EQUAL(lb_grad_norm(params, 3, &plain), LB_OK);
        CU_ASSERT_DOUBLE_EQUAL(plain, want_norm, 1e-12 * want_norm);
        CU_ASSERT_EQUAL(lb_clip_grad_norm(params, 3, max_norm, &norm), LB_OK);
        CU_ASSERT_DOUBLE_EQUAL(norm, want_norm, 1e-12 * want_norm);
        CU_ASSERT(k == 0 ? norm > max_norm : norm < max_norm);
        LB_ASSERT_CLOSE(w->grad, out_w, 1e-15, 1e-12);
        LB_ASSERT_CLOSE(b->grad, out_b, 1e-15, 1e-12);
        CU_ASSERT_PTR_NULL(c->grad);
        if (k == 0) { /* after clipping the norm is max_norm (up to the 1e-6 guard) */
            CU_ASSERT_EQUAL(lb_grad_norm(params, 3, &norm), LB_OK);
            CU_ASSERT_DOUBLE_EQUAL(norm, max_norm, 1e-6);
        }
        lb_param_free(w);
        lb_param_free(b);
        lb_param_free(c);
        free(in_w);
        free(in_b);
        free(out_w);
        free(out_b);
    }
    H5Fclose(f);
}

static void test_clip_huge_and_tiny_norms(void)
{
    /* float32 gradients of 1e21: their squares overflow float32 (torch gives inf). */
    int64_t s5[1] = {5}, s2[1] = {2};
    double big[5] = {1e21, -1e21, 3e20, 0.0, -2.5e21};
    lb_var *g32 = lb_param_new(lb_tensor_zeros(LB_FLOAT32, 1, s5), "huge32");
    g32->grad = lb_tensor_from_doubles(LB_FLOAT32, 1, s5, big);
    double want = 0.0;
    for (int i = 0; i < 5; i++) {
        double x = lb_tensor_flat(g32->grad, i); /* the float32-rounded values */
        want += x * x;
    }
    want = sqrt(want);
    double norm = 0;
    CU_ASSERT_EQUAL(lb_clip_grad_norm(&g32, 1, 1.0, &norm), LB_OK);
    CU_ASSERT_TRUE(isfinite(norm));
    CU_ASSERT_DOUBLE_EQUAL(norm, want, 1e-14 * want);
    CU_ASSERT_TRUE(norm > 2.8e21 && norm < 2.9e21);
    for (int i = 0; i < 5; i++)
        CU_ASSERT_TRUE(isfinite(lb_tensor_flat(g32->grad, i)));
    double after = 0;
    CU_ASSERT_EQUAL(lb_grad_norm(&g32, 1, &after), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(after, 1.0, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(g32->grad, 4), -2.5e21 / want, 1e-7);
    lb_param_free(g32);

    /* float64: squares overflow (1e300) or underflow (1e-200, subnormal) double. */
    const double m = ldexp(1.0, -1070); /* subnormal; 3m, 4m and 5m are exact */
    const double pairs[4][3] = {{3e300, 4e300, 5e300}, {3e200, 4e200, 5e200}, {3e-200, 4e-200, 5e-200},
                                {3 * m, 4 * m, 5 * m}};
    for (int k = 0; k < 4; k++) {
        lb_var *p = lb_param_new(lb_tensor_zeros(LB_FLOAT64, 1, s2), "pair");
        p->grad = lb_tensor_from_doubles(LB_FLOAT64, 1, s2, pairs[k]);
        CU_ASSERT_EQUAL(lb_grad_norm(&p, 1, &norm), LB_OK);
        CU_ASSERT_DOUBLE_EQUAL(norm, pairs[k][2], 4e-16 * pairs[k][2]);
        lb_param_free(p);
    }
    /* A norm beyond the largest double is reported, not returned as inf silently. */
    double over[2] = {1.5e308, 1.5e308};
    lb_var *p = lb_param_new(lb_tensor_zeros(LB_FLOAT64, 1, s2), "over");
    p->grad = lb_tensor_from_doubles(LB_FLOAT64, 1, s2, over);
    CU_ASSERT_EQUAL(lb_clip_grad_norm(&p, 1, 1.0, &norm), LB_ERR_NUMERIC);
    CU_ASSERT_TRUE(isinf(norm));
    CU_ASSERT_EQUAL(lb_tensor_flat(p->grad, 0), 1.5e308);
    lb_param_free(p);
    /* No gradients at all: norm 0, nothing to do. */
    lb_var *none = lb_param_new(lb_tensor_zeros(LB_FLOAT64, 1, s2), "none");
    CU_ASSERT_EQUAL(lb_clip_grad_norm(&none, 1, 1.0, &norm), LB_OK);
    CU_ASSERT_EQUAL(norm, 0.0);
    CU_ASSERT_EQUAL(lb_clip_grad_norm(&none, 1, 0.0, &norm), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_clip_grad_norm(&none, 1, NAN, NULL), LB_ERR_VALUE);
    lb_param_free(none);
}

static void test_nonfinite_gradient_skips_step(void)
{
    int64_t s6[1] = {6}, s3[1] = {3};
    double wv[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {-1, 0, 1};
    double wg[6] = {0.1, 0.2, 0.3, 0.4, NAN, 0.6}, bg[3] = {1, INFINITY, 2};
    lb_var *w = lb_param_new(lb_tensor_from_doubles(LB_FLOAT32, 1, s6, wv), "enc.w");
    lb_var *b = lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 1, s3, bv), "enc.b");
    lb_var *params[2] = {w, b};
    lb_optim_config cfg = lb_optim_defaults(LB_OPTIM_ADAM);
    lb_optim *opt = lb_optim_new(&cfg, params, 2);
    w->grad = lb_tensor_from_doubles(LB_FLOAT32, 1, s6, wg);
    b->grad = lb_tensor_from_doubles(LB_FLOAT64, 1, s3, bg);
    void *gw = snapshot(w->grad), *gb = snapshot(b->grad);

    /* The trainer's pattern: clip; on a numeric error skip the step. */
    double norm = 0;
    lb_status st = lb_clip_grad_norm(params, 2, 1.0, &norm);
    CU_ASSERT_EQUAL(st, LB_ERR_NUMERIC);
    CU_ASSERT_TRUE(isnan(norm));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'enc.w'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "index 4"));
    if (st == LB_OK)
        lb_optim_step(opt);
    CU_ASSERT_TRUE(same_bits(w->grad, gw)); /* gradients not scaled */
    CU_ASSERT_TRUE(same_bits(b->grad, gb));
    LB_ASSERT_CLOSE(w->value, wv, 0, 0); /* parameters untouched */
    LB_ASSERT_CLOSE(b->value, bv, 0, 0);
    CU_ASSERT_EQUAL(lb_tensor_flat(lb_optim_state_find(opt, "step.enc.w"), 0), 0.0);

    CU_ASSERT_EQUAL(lb_grad_check_finite(params, 2), LB_ERR_NUMERIC);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'enc.w'"));
    /* Only an infinity left: named, and the norm is +inf as torch reports. */
    lb_param_zero_grad(w);
    CU_ASSERT_EQUAL(lb_grad_check_finite(params, 2), LB_ERR_NUMERIC);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "'enc.b'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "index 1"));
    CU_ASSERT_EQUAL(lb_grad_norm(params, 2, &norm), LB_ERR_NUMERIC);
    CU_ASSERT_TRUE(isinf(norm) && norm > 0);
    /* Finite again: OK. */
    lb_param_zero_grad(b);
    b->grad = lb_tensor_from_doubles(LB_FLOAT64, 1, s3, bv);
    CU_ASSERT_EQUAL(lb_grad_check_finite(params, 2), LB_OK);
    CU_ASSERT_EQUAL(lb_grad_norm(params, 2, &norm), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(norm, sqrt(2.0), 1e-15);
    free(gw);
    free(gb);
    lb_optim_free(opt);
    lb_param_free(w);
    lb_param_free(b);
}

/* ---- schedules ---- */

static void test_schedule_key_steps(void)
{
    /* Warm-up 10, cosine to step 110, floor 0.1 * base. */
    lb_schedule c = lb_schedule_cosine(1.0, 10, 110, 0.1);
    CU_ASSERT_EQUAL(lb_schedule_check(&c), LB_OK);
    CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&c, 0), 0.1, 1e-15);   /* warm-up start: base / W */
    CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&c, 4), 0.5, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&c, 9), 1.0, 1e-15);   /* warm-up end */
    CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&c, 10), 1.0, 1e-15);  /* cosine start */
    CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&c, 60), 0.55, 1e-15); /* midpoint: (base + min) / 2 */
    CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&c, 35), 0.1 + 0.9 * 0.5 * (1 + cos(M_PI / 4)), 1e-15);
    CU_ASSERT_TRUE(lb_schedule_lr(&c, 109) > 0.1);
    CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&c, 110), 0.1, 1e-15); /* end */
    CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&c, 100000), 0.1, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&c, -3), 0.1, 1e-15);
    for (int64_t s = 10; s < 110; s++) /* monotone decay */
        CU_ASSERT_TRUE(lb_schedule_lr(&c, s + 1) <= lb_schedule_lr(&c, s));

    lb_schedule st = lb_schedule_step(0.1, 3, 0.5);
    double want[8] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025};
    for (int s = 0; s < 8; s++)
        CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&st, s), want[s], 1e-17);
    st.warmup_steps = 2; /* warm-up, then the decay counts from its end */
    double want_w[8] = {0.05, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05};
    for (int s = 0; s < 8; s++)
        CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&st, s), want_w[s], 1e-17);

    lb_schedule k = lb_schedule_constant(3e-4);
    CU_ASSERT_EQUAL(lb_schedule_lr(&k, 0), 3e-4);
    CU_ASSERT_EQUAL(lb_schedule_lr(&k, 1000000), 3e-4);
    k.warmup_steps = 4;
    CU_ASSERT_DOUBLE_EQUAL(lb_schedule_lr(&k, 1), 1.5e-4, 1e-19);
    CU_ASSERT_EQUAL(lb_schedule_lr(&k, 4), 3e-4);

    /* Invalid schedules: an error naming the field; lr is NaN. */
    lb_schedule bad = lb_schedule_cosine(1.0, 10, 10, 0.0);
    CU_ASSERT_EQUAL(lb_schedule_check(&bad), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "total_steps"));
    CU_ASSERT_TRUE(isnan(lb_schedule_lr(&bad, 0)));
    bad = lb_schedule_cosine(1.0, 0, 10, 1.5);
    CU_ASSERT_EQUAL(lb_schedule_check(&bad), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "min_lr_ratio"));
    bad = lb_schedule_step(1.0, 0, 0.5);
    CU_ASSERT_EQUAL(lb_schedule_check(&bad), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "step_size"));
    bad = lb_schedule_step(1.0, 2, 2.0);
    CU_ASSERT_EQUAL(lb_schedule_check(&bad), LB_ERR_VALUE);
    CU_ASSERT_PTR_NOT_NULL(strstr(lb_last_error(), "gamma"));
    bad = lb_schedule_constant(-1.0);
    CU_ASSERT_EQUAL(lb_schedule_check(&bad), LB_ERR_VALUE);
    bad = lb_schedule_constant(1.0);
    bad.warmup_steps = -1;
    CU_ASSERT_EQUAL(lb_schedule_check(&bad), LB_ERR_VALUE);
    CU_ASSERT_EQUAL(lb_schedule_check(NULL), LB_ERR_VALUE);
}

static void test_schedules_match_torch(void)
{
    hid_t f = fixture_open();
    const char *cases[4] = {"schedule/constant", "schedule/cosine_warmup", "schedule/cosine_nowarmup",
                            "schedule/step"};
    for (int k = 0; k < 4; k++) {
        lb_schedule s;
        memset(&s, 0, sizeof s);
        s.kind = (lb_schedule_kind)(int)fixture_attr(f, cases[k], "kind_id");
        s.base_lr = fixture_attr(f, cases[k], "base_lr");
        s.warmup_steps = (int64_t)fixture_attr(f, cases[k], "warmup");
        s.total_steps = (int64_t)fixture_attr(f, cases[k], "total");
        s.min_lr_ratio = fixture_attr(f, cases[k], "min_ratio");
        s.step_size = (int64_t)fixture_attr(f, cases[k], "step_size");
        s.gamma = fixture_attr(f, cases[k], "gamma");
        CU_ASSERT_EQUAL(lb_schedule_check(&s), LB_OK);
        char path[128];
        snprintf(path, sizeof path, "%s/lr", cases[k]);
        int64_t n;
        double *want = fixture_read(f, path, &n);
        CU_ASSERT_TRUE(n >= 10);
        for (int64_t i = 0; i < n; i++) {
            double got = lb_schedule_lr(&s, i);
            if (!(fabs(got - want[i]) <= 1e-12 * s.base_lr)) {
                fprintf(stderr, "\n  %s step %lld: %.17g, torch %.17g\n", cases[k], (long long)i, got, want[i]);
                CU_FAIL("schedule differs from torch.optim.lr_scheduler");
            }
        }
        free(want);
    }
    H5Fclose(f);
}

/* A schedule driving an optimizer: the lr each step is the schedule's. */
static void test_schedule_drives_optimizer(void)
{
    int64_t s1[1] = {1};
    double zero = 0.0, one = 1.0;
    lb_var *p = lb_param_new(lb_tensor_from_doubles(LB_FLOAT64, 1, s1, &zero), "p");
    lb_optim_config cfg = lb_optim_defaults(LB_OPTIM_SGD);
    lb_optim *opt = lb_optim_new(&cfg, &p, 1);
    lb_schedule s = lb_schedule_cosine(0.5, 2, 6, 0.2);
    double expected = 0.0;
    for (int64_t step = 0; step < 8; step++) {
        CU_ASSERT_EQUAL(lb_optim_set_lr(opt, lb_schedule_lr(&s, step)), LB_OK);
        p->grad = lb_tensor_from_doubles(LB_FLOAT64, 1, s1, &one);
        CU_ASSERT_EQUAL(lb_optim_step(opt), LB_OK);
        lb_optim_zero_grad(opt);
        expected -= lb_schedule_lr(&s, step);
    }
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(p->value, 0), expected, 1e-15);
    lb_optim_free(opt);
    lb_param_free(p);
}

int main(void)
{
    const lb_test_case cases[] = {
        {"SGD (plain, nesterov+wd, momentum+dampening) matches torch.optim.SGD, 5 steps", test_sgd_matches_torch},
        {"Adam (default, wd + betas + eps) matches torch.optim.Adam, 5 steps", test_adam_matches_torch},
        {"AdamW (wd, betas, eps) matches torch.optim.AdamW, 5 steps", test_adamw_matches_torch},
        {"float32 parameters: float32 state, trace within float32 rounding", test_float32_params},
        {"Adam eps outside sqrt(v_hat); AdamW decay lr*wd (by hand)", test_adam_rules_by_hand},
        {"state names, order, restore by name continues bit-for-bit", test_state_enumeration_and_restore},
        {"config checks, parameter checks, bad gradient stops the whole step", test_config_and_argument_errors},
        {"optimizer and schedule names parse", test_parse_names},
        {"clip_grad_norm_ matches torch (clipped, unclipped, missing grad)", test_clip_matches_torch},
        {"norm of 1e21 float32 and 1e300/1e-200/subnormal float64 gradients", test_clip_huge_and_tiny_norms},
        {"non-finite gradient reported by name, step skipped, nothing changed", test_nonfinite_gradient_skips_step},
        {"schedule values at warm-up start/end, cosine midpoint, end; checks", test_schedule_key_steps},
        {"schedules match torch LambdaLR/LinearLR+CosineAnnealingLR/StepLR", test_schedules_match_torch},
        {"schedule drives the optimizer's learning rate", test_schedule_drives_optimizer},
        {NULL, NULL},
    };
    return lb_test_main("optim", cases);
}
