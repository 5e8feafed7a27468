#include "support.h"

#include <CUnit/Basic.h>
#include <ctype.h>
#include <hdf5.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor/isa.h"
#include "tensor/rng.h"

double lb_test_time_scale(void)
{
    static double scale;
    if (scale == 0) {
        scale = 1;
        const char *text = getenv("LOOKBACK_TEST_TIME_SCALE");
        if (text && *text) {
            char *end = NULL;
            double v = strtod(text, &end);
            if (end != text && *end == '\0' && v >= 1 && v <= 1000)
                scale = v;
            else
                fprintf(stderr, "\n  LOOKBACK_TEST_TIME_SCALE='%s' is not a number in [1, 1000]: time limits unscaled\n",
                        text);
        }
    }
    return scale;
}

double lb_test_limit(double seconds) { return seconds * lb_test_time_scale(); }

int lb_test_main(const char *suite_name, const lb_test_case *cases)
{
    /* LOOKBACK_ISA=avx2 (ctest's reruns of the kernel tests): a build this CPU cannot
     * run is a skip, not a failure. */
    if (lb_isa_env_check() != LB_OK) {
        printf("%s: skipped: %s\n", suite_name, lb_last_error());
        return 77;
    }
    printf("%s: kernels' build %s\n", suite_name, lb_isa_name(lb_isa()));
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite suite = CU_add_suite(suite_name, NULL, NULL);
    for (const lb_test_case *c = cases; suite && c->name; c++)
        CU_add_test(suite, c->name, c->fn);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return (failed || ran == 0) ? 1 : 0;
}

int lb_check_close(const lb_tensor *t, const double *expected, double atol, double rtol, const char *what)
{
    int64_t n = lb_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double got = lb_tensor_flat(t, i);
        if (!(fabs(got - expected[i]) <= atol + rtol * fabs(expected[i]))) {
            fprintf(stderr, "\n  %s: element %lld is %.10g, expected %.10g\n", what, (long long)i, got, expected[i]);
            return 0;
        }
    }
    return 1;
}

int lb_check_tensors_close(const lb_tensor *a, const lb_tensor *b, double atol, double rtol, const char *what)
{
    char sa[128], sb[128];
    if (!a || !b || !lb_tensor_same_shape(a, b)) {
        fprintf(stderr, "\n  %s: shapes differ (%s vs %s)\n", what, a ? lb_tensor_describe(a, sa, sizeof sa) : "NULL",
                b ? lb_tensor_describe(b, sb, sizeof sb) : "NULL");
        return 0;
    }
    int64_t n = lb_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = lb_tensor_flat(a, i), y = lb_tensor_flat(b, i);
        if (!(fabs(x - y) <= atol + rtol * fabs(y))) {
            fprintf(stderr, "\n  %s: element %lld is %.10g vs %.10g\n", what, (long long)i, x, y);
            return 0;
        }
    }
    return 1;
}

const char *lb_fixture_path(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", LB_FIXTURES_DIR, name);
    return path;
}

/* Values 0, 1, 2, ... in row-major order. */
lb_tensor *lb_test_iota(lb_dtype dtype, int ndim, const int64_t *shape)
{
    lb_tensor *t = lb_tensor_zeros(dtype, ndim, shape);
    for (int64_t i = 0; i < lb_tensor_numel(t); i++)
        LB_DISPATCH(dtype, T, { ((T *)lb_tensor_data(t))[i] = (T)i; });
    return t;
}

lb_tensor *lb_test_uniform(lb_dtype dtype, int ndim, const int64_t *shape, uint64_t seed, double low, double high)
{
    lb_rng rng;
    lb_rng_seed(&rng, seed);
    lb_tensor *t = lb_tensor_zeros(dtype, ndim, shape);
    if (t)
        lb_rng_fill_uniform(&rng, t, low, high);
    return t;
}

lb_var *lb_test_uniform_param(int ndim, const int64_t *shape, uint64_t seed, double low, double high,
                              const char *name)
{
    return lb_param_new(lb_test_uniform(LB_FLOAT64, ndim, shape, seed, low, high), name);
}

lb_tensor *lb_test_random_tensor(lb_dtype dtype, int ndim, const int64_t *shape, uint64_t seed)
{
    return lb_test_uniform(dtype, ndim, shape, seed, -1, 1);
}

lb_var *lb_test_random_param(int ndim, const int64_t *shape, uint64_t seed, const char *name)
{
    return lb_test_uniform_param(ndim, shape, seed, -1, 1, name);
}

void lb_test_randomize_params(lb_params *ps, uint64_t seed, double low, double high)
{
    lb_rng rng;
    lb_rng_seed(&rng, seed);
    for (int i = 0; i < ps->count; i++)
        lb_rng_fill_uniform(&rng, ps->items[i]->value, low, high);
}

int lb_test_error_has(const char *text) { return strstr(lb_last_error(), text) != NULL; }


void lb_test_assert_shape(const lb_var *v, int ndim, const int64_t *shape)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->value->ndim, ndim);
    for (int d = 0; d < ndim && d < v->value->ndim; d++)
        CU_ASSERT_EQUAL(v->value->shape[d], shape[d]);
    CU_ASSERT_TRUE(lb_tensor_is_contiguous(v->value));
}

/* ---- forward values ---- */


lb_tensor *lb_test_h5_read(long long file, const char *name, lb_dtype dtype)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* missing datasets are reported by the tests */
    hid_t ds = H5Lexists((hid_t)file, name, H5P_DEFAULT) > 0 ? H5Dopen2((hid_t)file, name, H5P_DEFAULT) : -1;
    if (ds < 0) {
        fprintf(stderr, "\n  dataset '%s' is missing\n", name);
        return NULL;
    }
    hid_t sp = H5Dget_space(ds);
    int nd = H5Sget_simple_extent_ndims(sp);
    lb_tensor *t = NULL;
    if (nd >= 0 && nd <= LB_MAX_DIMS) {
        hsize_t dims[LB_MAX_DIMS];
        int64_t shape[LB_MAX_DIMS];
        H5Sget_simple_extent_dims(sp, dims, NULL);
        size_t n = 1;
        for (int i = 0; i < nd; i++) {
            shape[i] = (int64_t)dims[i];
            n *= (size_t)dims[i];
        }
        double *buf = malloc((n ? n : 1) * sizeof *buf);
        if (buf && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0)
            t = lb_tensor_from_doubles(dtype, nd, shape, buf);
        free(buf);
    } else {
        fprintf(stderr, "\n  dataset '%s' has %d dims (at most %d are read)\n", name, nd, (int)LB_MAX_DIMS);
    }
    H5Sclose(sp);
    H5Dclose(ds);
    return t;
}

lb_tensor *lb_test_h5_read_path(const char *path, const char *name, lb_dtype dtype)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        fprintf(stderr, "\n  cannot open %s\n", path);
        return NULL;
    }
    lb_tensor *t = lb_test_h5_read((long long)f, name, dtype);
    H5Fclose(f);
    return t;
}

int lb_test_metrics_match(const char *path_a, const char *path_b, int expect_rows, double rtol)
{
    FILE *fa = fopen(path_a, "r"), *fb = fopen(path_b, "r");
    int rows = 0, ok = fa && fb;
    char la[512], lb[512];
    while (ok && fgets(la, sizeof la, fa)) {
        if (!fgets(lb, sizeof lb, fb)) {
            ok = 0;
            break;
        }
        if (!isdigit((unsigned char)la[0])) { /* the header */
            ok = strcmp(la, lb) == 0;
            continue;
        }
        long long sa, sb;
        char xa[16], xb[16];
        double va[4], vb[4];
        ok = sscanf(la, "%lld,%15[a-z],%lf,%lf,%lf,%lf", &sa, xa, &va[0], &va[1], &va[2], &va[3]) == 6 &&
             sscanf(lb, "%lld,%15[a-z],%lf,%lf,%lf,%lf", &sb, xb, &vb[0], &vb[1], &vb[2], &vb[3]) == 6 && sa == sb &&
             strcmp(xa, xb) == 0;
        for (int k = 0; ok && k < 4; k++)
            ok = fabs(va[k] - vb[k]) <= rtol * fmax(1.0, fabs(va[k]));
        if (!ok)
            fprintf(stderr, "\n  metrics differ:\n  %s  %s", la, lb);
        rows++;
    }
    if (ok && fb && fgets(lb, sizeof lb, fb)) {
        fprintf(stderr, "\n  %s has more rows than %s\n", path_b, path_a);
        ok = 0;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    if (ok && rows != expect_rows)
        fprintf(stderr, "\n  %d metrics rows, expected %d\n", rows, expect_rows);
    return ok && rows == expect_rows;
}

lb_model_config lb_test_small_model(lb_model_kind kind, lb_pos_kind pos, lb_dtype dtype, int64_t vocab_size,
                                    int64_t num_classes, int64_t window, int64_t max_seq_len, uint64_t seed)
{
    lb_model_config c;
    lb_model_config_default(kind, &c);
    c.dtype = dtype;
    c.vocab_size = vocab_size;
    c.num_classes = num_classes;
    c.head = LB_HEAD_EVERY;
    c.n_layers = kind == LB_MODEL_CONV ? 3 : 2;
    c.d_model = 16;
    c.n_heads = 2;
    c.d_ff = 24;
    c.pos = pos;
    c.window = kind == LB_MODEL_LOCAL ? window : 0;
    c.hidden_size = 12;
    c.kernel_size = 3;
    c.max_seq_len = max_seq_len;
    c.seed = seed;
    return c;
}

void lb_test_tiny_lstm(const lb_dataset *ds, int64_t width, int64_t steps, lb_model_config *mc, lb_train_config *tc)
{
    lb_model_config_default(LB_MODEL_LSTM, mc);
    mc->vocab_size = lb_dataset_vocab_size(ds);
    mc->num_classes = lb_dataset_num_classes(ds);
    mc->max_seq_len = lb_dataset_seq_len(ds);
    mc->n_layers = 1;
    mc->d_model = width;
    mc->hidden_size = width;
    lb_train_config_default(tc);
    tc->steps = steps;
    tc->batch_size = 4;
    tc->eval_every = 0;
    tc->threads = 1;
}
