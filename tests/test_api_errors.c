/* Bad input to the tensor API is refused with a message, never a crash or a tiny buffer:
 * shapes whose element count or bytes overflow, negative sizes and ranks out of range,
 * out-of-range indices, NULL arguments (the API walk, test_api_walk.c, calls every public
 * function with NULL; here the messages are checked). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "support.h"
#include "train/trainer.h"

static void test_overflowing_shapes(void)
{
    const int64_t half[2] = {INT64_MAX / 2, 4};
    const int64_t cube[3] = {INT64_C(1) << 31, INT64_C(1) << 31, INT64_C(1) << 31};
    const int64_t bytes[2] = {INT64_C(1) << 31, INT64_C(1) << 31}; /* 2^62 elements: bytes overflow */
    for (int dt = 0; dt < 2; dt++) {
        lb_dtype dtype = dt ? LB_FLOAT64 : LB_FLOAT32;
        lb_clear_error();
        CU_ASSERT_PTR_NULL(lb_tensor_zeros(dtype, 2, half));
        LB_ASSERT_ERROR(LB_ERR_SHAPE, "lb_tensor_zeros", "[4611686018427387903, 4]");
        CU_ASSERT_PTR_NULL(lb_tensor_empty(dtype, 2, half));
        LB_ASSERT_ERROR(LB_ERR_SHAPE, "lb_tensor_empty", "[4611686018427387903, 4]");
        CU_ASSERT_PTR_NULL(lb_tensor_empty(dtype, 3, cube));
        LB_ASSERT_ERROR(LB_ERR_SHAPE, "lb_tensor_empty", "[2147483648, 2147483648, 2147483648]");
        CU_ASSERT_PTR_NULL(lb_tensor_zeros(dtype, 2, bytes));
        LB_ASSERT_ERROR(LB_ERR_SHAPE, "lb_tensor_zeros", "[2147483648, 2147483648]");
        CU_ASSERT_PTR_NULL(lb_tensor_from_data(dtype, 3, cube, NULL));
        LB_ASSERT_ERROR(LB_ERR_SHAPE, "lb_tensor_", "[2147483648, 2147483648, 2147483648]");
    }
    /* the checked helpers themselves */
    int64_t n = 0;
    CU_ASSERT_EQUAL(lb_checked_mul(INT64_MAX / 2, 4, &n), -1);
    CU_ASSERT_EQUAL(lb_checked_mul(-1, 4, &n), -1);
    CU_ASSERT_EQUAL(lb_checked_mul(INT64_C(3037000499), INT64_C(3037000499), &n), 0);
    CU_ASSERT_EQUAL(n, INT64_C(9223372030926249001));
    CU_ASSERT_EQUAL(lb_shape_numel("op", 3, cube, LB_FLOAT32, &n), LB_ERR_SHAPE);
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "op", "[2147483648, 2147483648, 2147483648]");
    const int64_t ok[3] = {2, 3, 4};
    CU_ASSERT_EQUAL(lb_shape_numel("op", 3, ok, LB_FLOAT64, &n), LB_OK);
    CU_ASSERT_EQUAL(n, 24);
    /* negative sizes and ranks */
    const int64_t neg[2] = {3, -2};
    CU_ASSERT_PTR_NULL(lb_tensor_zeros(LB_FLOAT32, 2, neg));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "lb_tensor_zeros", "[3, -2]");
    CU_ASSERT_PTR_NULL(lb_tensor_zeros(LB_FLOAT32, -1, ok));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "lb_tensor_zeros", "rank -1");
    CU_ASSERT_PTR_NULL(lb_tensor_zeros(LB_FLOAT32, LB_MAX_DIMS + 1, ok));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "lb_tensor_zeros", "rank 9");
}

static void test_views_refuse_overflow(void)
{
    const int64_t s[2] = {2, 3};
    lb_tensor *t = lb_test_iota(LB_FLOAT64, 2, s);
    /* reshape: the known sizes' product overflows before -1 is inferred */
    const int64_t r[3] = {INT64_C(1) << 40, INT64_C(1) << 40, -1};
    CU_ASSERT_PTR_NULL(lb_tensor_reshape(t, 3, r));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "reshape", "[1099511627776, 1099511627776, -1]");
    /* expand of a size-1 dim to more elements than int64 counts */
    const int64_t one[2] = {1, 3};
    lb_tensor *first = lb_tensor_slice(t, 0, 0, 1, 1);
    lb_tensor *row = lb_tensor_reshape(first, 2, one);
    CU_ASSERT_PTR_NOT_NULL_FATAL(row);
    const int64_t big[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 3};
    CU_ASSERT_PTR_NULL(lb_tensor_expand(row, 3, big));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "expand", "[1099511627776, 1099511627776, 3]");
    /* a slice with a step near INT64_MAX: one element, no overflow */
    lb_tensor *sl = lb_tensor_slice(t, 1, 1, 3, INT64_MAX);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sl);
    CU_ASSERT_EQUAL(sl->shape[1], 1);
    const int64_t at[2] = {1, 0};
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(sl, at), 4.0, 0);
    lb_tensor_free(sl);
    lb_tensor_free(row);
    lb_tensor_free(first);
    lb_tensor_free(t);
}

static void test_out_of_range_indices(void)
{
    const int64_t s[2] = {2, 3};
    lb_tensor *t = lb_test_iota(LB_FLOAT32, 2, s);
    const int64_t far[2] = {1, 1000000};
    lb_clear_error();
    CU_ASSERT_TRUE(isnan(lb_tensor_get(t, far)));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_get", "[1, 1000000]");
    CU_ASSERT_TRUE(lb_test_error_has("float32[2, 3]"));
    uint64_t v = lb_tensor_version(t);
    lb_tensor_set(t, far, 7.0);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_set", "[1, 1000000]");
    CU_ASSERT_EQUAL(lb_tensor_version(t), v); /* nothing written */
    const int64_t negative[2] = {-1, 0};
    CU_ASSERT_TRUE(isnan(lb_tensor_get(t, negative)));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_get", "[-1, 0]");
    CU_ASSERT_TRUE(isnan(lb_tensor_flat(t, 1000000)));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_flat", "1000000");
    CU_ASSERT_TRUE(isnan(lb_tensor_flat(t, -1)));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_flat", "-1");
    /* the last valid ones still work */
    const int64_t last[2] = {1, 2};
    lb_tensor_set(t, last, 9.0);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_get(t, last), 9.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(lb_tensor_flat(t, 5), 9.0, 0);
    lb_tensor_free(t);
}

static void test_null_arguments(void)
{
    const int64_t s[2] = {2, 3};
    char buf[64];
    lb_clear_error();
    CU_ASSERT_PTR_NULL(lb_tensor_zeros(LB_FLOAT32, 2, NULL));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_zeros", "shape is NULL");
    CU_ASSERT_EQUAL(lb_tensor_numel(NULL), -1);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_numel", "t is NULL");
    CU_ASSERT_TRUE(isnan(lb_tensor_get(NULL, s)));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_get", "t is NULL");
    CU_ASSERT_PTR_NULL(lb_tensor_reshape(NULL, 2, s));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_reshape", "t is NULL");
    CU_ASSERT_EQUAL(lb_tensor_copy_into(NULL, NULL), LB_ERR_VALUE);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_copy_into", "dst is NULL");
    lb_clear_error();
    lb_tensor_fill(NULL, 1);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_fill", "t is NULL");
    CU_ASSERT_PTR_NULL(lb_tensor_describe(NULL, buf, sizeof buf));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_tensor_describe", "t is NULL");
    /* a scalar's shape may be NULL */
    lb_tensor *sc = lb_tensor_zeros(LB_FLOAT64, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL(sc);
    CU_ASSERT_EQUAL(lb_tensor_numel(sc), 1);
    lb_tensor_free(sc);
    /* lb_input of NULL: its own message when no earlier error is pending, the earlier one
     * otherwise (a chain of calls is checked once at its end) */
    lb_graph *g = lb_graph_new();
    lb_clear_error();
    CU_ASSERT_PTR_NULL(lb_input(g, NULL, 1));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_input", "value is NULL");
    const int64_t neg[1] = {-5};
    CU_ASSERT_PTR_NULL(lb_input(g, lb_tensor_zeros(LB_FLOAT32, 1, neg), 1));
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "lb_tensor_zeros", "[-5]");
    lb_graph_free(g);
    lb_clear_error();
    CU_ASSERT_EQUAL(lb_train_config_check(NULL), LB_ERR_VALUE);
    CU_ASSERT_TRUE(lb_test_error_has("is NULL"));
    CU_ASSERT_PTR_NULL(lb_trainer_new(NULL, NULL, NULL));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_trainer_new", "model is NULL");
}

/* Ranges and counts the caller gets wrong: an empty or whole-int64 range for the RNG, a
 * negative size to broadcast, a rank past LB_MAX_DIMS, more axes than the tensor has, a
 * zero fan, a NULL output of the name parsers. */
static void test_ranges_and_counts(void)
{
    lb_rng r;
    lb_rng_seed(&r, 7);
    lb_clear_error();
    CU_ASSERT_EQUAL(lb_rng_int(&r, 5, 0), -1);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_rng_int", "[5, 0]");
    lb_clear_error();
    int distinct = 0;
    int64_t first = lb_rng_int(&r, INT64_MIN, INT64_MAX);
    for (int i = 0; i < 8; i++)
        distinct += lb_rng_int(&r, INT64_MIN, INT64_MAX) != first;
    CU_ASSERT_TRUE(distinct >= 7); /* the whole range, not INT64_MIN every time */
    CU_ASSERT_EQUAL(lb_last_status(), LB_OK);
    for (int i = 0; i < 100; i++) {
        int64_t v = lb_rng_int(&r, -3, 3);
        CU_ASSERT_TRUE(v >= -3 && v <= 3);
    }
    int64_t perm[4] = {9, 9, 9, 9};
    lb_rng_permutation(&r, -1, perm);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_rng_permutation", "-1");
    CU_ASSERT_EQUAL(perm[0], 9);
    lb_rng_permutation(NULL, 4, perm);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_rng_permutation", "rng is NULL");

    const int64_t neg[1] = {-5}, one[1] = {1};
    int out_ndim = 0;
    int64_t out_shape[LB_MAX_DIMS];
    CU_ASSERT_EQUAL(lb_broadcast_shapes("x", 1, neg, 1, one, &out_ndim, out_shape), LB_ERR_SHAPE);
    LB_ASSERT_ERROR(LB_ERR_SHAPE, "x", "negative");

    char buf[64];
    const int64_t shape2[2] = {2, 3};
    lb_clear_error();
    lb_shape_str(100, shape2, buf, sizeof buf);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_shape_str", "rank 100");

    lb_graph *g = lb_graph_new();
    lb_var *x = lb_input(g, lb_tensor_zeros(LB_FLOAT32, 2, shape2), 1);
    const int axes2[2] = {0, 1};
    CU_ASSERT_PTR_NULL(lb_sum_axes(g, x, 100, axes2, 0));
    LB_ASSERT_ERROR(LB_ERR_VALUE, "n_axes 100", "2 axes");
    lb_clear_error();
    lb_var *w = lb_input(g, lb_tensor_zeros(LB_FLOAT32, 2, shape2), 1);
    lb_init_xavier_uniform(w, &r, 0, 0);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_init_xavier_uniform", "fan_in 0");
    CU_ASSERT_FALSE(isnan(lb_tensor_flat(w->value, 0)));
    lb_graph_free(g);

    lb_optim_kind ok;
    lb_task_kind tk;
    lb_model_kind mk;
    CU_ASSERT_EQUAL(lb_optim_kind_parse("adam", NULL), LB_ERR_VALUE);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_optim_kind_parse", "kind is NULL");
    CU_ASSERT_EQUAL(lb_task_parse_name("spike", NULL), LB_ERR_VALUE);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_task_parse_name", "out is NULL");
    CU_ASSERT_EQUAL(lb_model_kind_parse("lstm", NULL), LB_ERR_VALUE);
    LB_ASSERT_ERROR(LB_ERR_VALUE, "lb_model_kind_parse", "kind is NULL");
    CU_ASSERT_EQUAL(lb_optim_kind_parse("adam", &ok), LB_OK);
    CU_ASSERT_EQUAL(lb_task_parse_name("spike", &tk), LB_OK);
    CU_ASSERT_EQUAL(lb_model_kind_parse("lstm", &mk), LB_OK);
}

int main(void)
{
    static const lb_test_case cases[] = {
        {"shapes whose size overflows are refused, naming the shape", test_overflowing_shapes},
        {"reshape and expand refuse overflowing shapes; a huge slice step is exact", test_views_refuse_overflow},
        {"out-of-range indices are refused, naming the index and the tensor", test_out_of_range_indices},
        {"NULL arguments are refused with a message", test_null_arguments},
        {"ranges and counts: RNG ranges, negative sizes, ranks, axes, fans", test_ranges_and_counts},
        {NULL, NULL},
    };
    return lb_test_main("api_errors", cases);
}
