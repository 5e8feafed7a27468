/* What a step costs (train/cost.h, layers/family.h's flops row): each family's FLOPs per
 * position against a count by hand at two sizes, the MFU and the sgemm rate it divides by,
 * and the figures a trainer reports and writes to metrics.csv. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/tasks.h"
#include "layers/family.h"
#include "support.h"
#include "train/cost.h"
#include "train/trainer.h"

/* Counts c at seq_len and checks forward and attention FLOPs per position against the
 * hand counts (totals over the sequence), and training = 3 x forward. */
static void check_count(const lb_model_config *c, int64_t seq_len, double forward_total, double attention_total)
{
    lb_model_flops f;
    CU_ASSERT_EQUAL_FATAL(lb_model_flops_count(c, seq_len, &f), LB_OK);
    CU_ASSERT_EQUAL(f.seq_len, seq_len);
    CU_ASSERT_DOUBLE_EQUAL(f.forward, forward_total / (double)seq_len, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(f.attention, attention_total / (double)seq_len, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(f.training, 3 * forward_total / (double)seq_len, 1e-9);
    if (fabs(f.forward - forward_total / (double)seq_len) > 1e-9)
        fprintf(stderr, "%s: counted %.17g, by hand %.17g per position\n", lb_model_kind_name(c->kind), f.forward,
                forward_total / (double)seq_len);
}

/* Token inputs (an embedding lookup: no FLOPs) and a head at every position. */
static void tokens_every(lb_model_kind kind, lb_model_config *c, int64_t vocab)
{
    lb_model_config_default(kind, c);
    c->vocab_size = vocab;
    c->num_classes = vocab;
    c->head = LB_HEAD_EVERY;
}

/* Real-valued inputs (a linear layer: 2 F D per position) and the last-position head. */
static void features_last(lb_model_kind kind, lb_model_config *c, int64_t features, int64_t classes)
{
    lb_model_config_default(kind, c);
    c->input_features = features;
    c->num_classes = classes;
    c->head = LB_HEAD_LAST;
}

static void test_transformer_by_hand(void)
{
    lb_model_config c;
    /* L 2, D 16, F 32, T 8, causal, vocabulary 10 at every position. Per block and
     * position 8 D² + 4 D F = 2048 + 2048; keys read 1 + 2 + ... + 8 = 36, 4 D each;
     * head 2 D C = 320 per position. */
    tokens_every(LB_MODEL_TRANSFORMER, &c, 10);
    c.n_layers = 2, c.d_model = 16, c.d_ff = 32, c.n_heads = 4;
    check_count(&c, 8, 2 * 8 * 4096.0 + 2 * 4 * 16 * 36.0 + 8 * 320.0, 2 * 4 * 16 * 36.0);
    /* Not causal: every query reads all 8 keys. */
    c.causal = 0;
    check_count(&c, 8, 2 * 8 * 4096.0 + 2 * 4 * 16 * 64.0 + 8 * 320.0, 2 * 4 * 16 * 64.0);
    /* L 3, D 32, F 64, T 16, 5 features, 2 classes at the last position. Blocks 0 and 1:
     * 16 (8192 + 8192) each and 4 D (1 + ... + 16 = 136) keys; block 2 computes K and V of
     * all 16 positions (16 · 4 D²), the query, output projection and feed-forward of the
     * last only (4 D² + 4 D F) and its 16 keys; input 2 · 5 · 32 per position; head
     * 2 · 32 · 2 once. */
    features_last(LB_MODEL_TRANSFORMER, &c, 5, 2);
    c.n_layers = 3, c.d_model = 32, c.d_ff = 64, c.n_heads = 4;
    double attention = 2 * 4 * 32 * 136.0 + 4 * 32 * 16.0;
    check_count(&c, 16,
                2 * 16 * 16384.0 + 16 * 4096.0 + (4096.0 + 8192.0) + attention + 16 * 2 * 5 * 32.0 + 2 * 32 * 2.0,
                attention);
}

static void test_local_by_hand(void)
{
    lb_model_config c;
    /* L 1, D 16, F 32, window 4, T 8: keys min(i + 1, 4) = 1 + 2 + 3 + 4 · 5 = 26. */
    tokens_every(LB_MODEL_LOCAL, &c, 10);
    c.n_layers = 1, c.d_model = 16, c.d_ff = 32, c.n_heads = 2, c.window = 4;
    check_count(&c, 8, 8 * 4096.0 + 4 * 16 * 26.0 + 8 * 320.0, 4 * 16 * 26.0);
    /* L 2, D 8, F 16, window 3, T 10, vocabulary 5: 8 D² + 4 D F = 1024 per position and
     * block; keys 1 + 2 + 3 · 8 = 27; head 2 · 8 · 5 = 80. */
    tokens_every(LB_MODEL_LOCAL, &c, 5);
    c.n_layers = 2, c.d_model = 8, c.d_ff = 16, c.n_heads = 2, c.window = 3;
    check_count(&c, 10, 2 * 10 * 1024.0 + 2 * 4 * 8 * 27.0 + 10 * 80.0, 2 * 4 * 8 * 27.0);
}

static void test_lstm_by_hand(void)
{
    lb_model_config c;
    /* L 1, D 8, H 16, T 8: 2 · 4H · (D + H) = 3072 per position; head 2 · 16 · 10. */
    tokens_every(LB_MODEL_LSTM, &c, 10);
    c.n_layers = 1, c.d_model = 8, c.hidden_size = 16;
    check_count(&c, 8, 8 * (3072.0 + 320.0), 0);
    /* L 2, D 16, H 8, T 4, 4 features, 3 classes at the last position: layer 0
     * 2 · 32 · 24 = 1536, layer 1 2 · 32 · 16 = 1024 per position; input 2 · 4 · 16 per
     * position; head 2 · 8 · 3 once. The LSTM computes every position. */
    features_last(LB_MODEL_LSTM, &c, 4, 3);
    c.n_layers = 2, c.d_model = 16, c.hidden_size = 8;
    check_count(&c, 4, 4 * (1536.0 + 1024.0) + 4 * 128.0 + 48.0, 0);
}

static void test_conv_by_hand(void)
{
    lb_model_config c;
    /* L 2, D 8, K 3, T 8: 2 K D² = 384 per layer and position; head 2 · 8 · 10. */
    tokens_every(LB_MODEL_CONV, &c, 10);
    c.n_layers = 2, c.d_model = 8, c.kernel_size = 3;
    check_count(&c, 8, 8 * (2 * 384.0 + 160.0), 0);
    /* L 3, D 16, K 2, T 5, 3 features, regression at the last position (one output):
     * 2 · 2 · 256 = 1024 per layer and position; input 2 · 3 · 16; head 2 · 16 · 1 once. */
    features_last(LB_MODEL_CONV, &c, 3, 0);
    c.n_layers = 3, c.d_model = 16, c.kernel_size = 2;
    check_count(&c, 5, 5 * 3 * 1024.0 + 5 * 96.0 + 32.0, 0);
}

static void test_linear_by_hand(void)
{
    lb_model_config c;
    /* L 2, D 16, F 32, 4 heads of d = 4, T 8: 8 D² + 4 D F = 4096 and 4 D (d + 1) = 320
     * per block and position; head 2 · 16 · 10. */
    tokens_every(LB_MODEL_LINEAR, &c, 10);
    c.n_layers = 2, c.d_model = 16, c.d_ff = 32, c.n_heads = 4;
    check_count(&c, 8, 2 * 8 * (4096.0 + 320.0) + 8 * 320.0, 0);
    /* L 1, D 8, F 8, 2 heads of d = 4, T 5, 3 features, 2 classes at the last position:
     * 512 + 256 + 4 · 8 · 5 = 928 per position (every position computed); input 2 · 3 · 8
     * per position; head 2 · 8 · 2 once. */
    features_last(LB_MODEL_LINEAR, &c, 3, 2);
    c.n_layers = 1, c.d_model = 8, c.d_ff = 8, c.n_heads = 2;
    check_count(&c, 5, 5 * 928.0 + 5 * 48.0 + 32.0, 0);
}

static void test_mamba_by_hand(void)
{
    lb_model_config c;
    /* L 1, D 16, Di 32, N 4, K 4, R = ceil(16 / 16) = 1, T 6: in_proj 2 · 16 · 64 = 2048,
     * x_proj 2 · 32 · 9 = 576, dt_proj 2 · 1 · 32 = 64, out_proj 2 · 32 · 16 = 1024, scan
     * 4 · 32 · 4 = 512, conv 2 · 4 · 32 = 256: 4480 per position; head 2 · 16 · 10. */
    tokens_every(LB_MODEL_MAMBA, &c, 10);
    c.n_layers = 1, c.d_model = 16, c.d_state = 4, c.d_conv = 4;
    check_count(&c, 6, 6 * (4480.0 + 320.0), 0);
}

static void test_every_family_counts(void)
{
    for (int k = 0; k < LB_MODEL_KIND_COUNT; k++) {
        lb_model_config c;
        tokens_every((lb_model_kind)k, &c, 16);
        lb_model_flops f;
        CU_ASSERT_EQUAL(lb_model_flops_count(&c, 32, &f), LB_OK);
        if (!lb_family_at(k)->flops) { /* a family without its count: NAN, said as such */
            CU_ASSERT_TRUE(isnan(f.forward) && isnan(f.training));
            continue;
        }
        CU_ASSERT_TRUE(f.forward > 0 && f.forward > f.attention && f.attention >= 0);
        CU_ASSERT_EQUAL(f.attention > 0, lb_family_at(k)->attention);
    }
    lb_model_config c;
    tokens_every(LB_MODEL_TRANSFORMER, &c, 16);
    lb_model_flops f;
    CU_ASSERT_NOT_EQUAL(lb_model_flops_count(&c, 0, &f), LB_OK);
    CU_ASSERT_TRUE(lb_test_error_has("seq_len = 0"));
    c.kind = (lb_model_kind)LB_MODEL_KIND_COUNT;
    CU_ASSERT_NOT_EQUAL(lb_model_flops_count(&c, 8, &f), LB_OK);
    CU_ASSERT_NOT_EQUAL(lb_model_flops_count(NULL, 8, &f), LB_OK);
}

static void test_rate_mfu_and_text(void)
{
    double rate = lb_sgemm_rate();
    CU_ASSERT_TRUE(rate > 1e8 && rate < 1e14); /* between 0.1 GFLOP/s and 100 TFLOP/s */
    CU_ASSERT_DOUBLE_EQUAL(lb_sgemm_rate(), rate, 0); /* remembered */
    CU_ASSERT_DOUBLE_EQUAL(lb_mfu(1e6, 2e3, 4e9), 0.5, 1e-12);
    CU_ASSERT_TRUE(isnan(lb_mfu(1e6, 2e3, 0)));
    CU_ASSERT_TRUE(isnan(lb_mfu(NAN, 2e3, 4e9)));
    CU_ASSERT_TRUE(isnan(lb_mfu(1e6, 0, 4e9)));
    double peak = lb_peak_memory_mib();
    CU_ASSERT_TRUE(peak > 1 && peak < 1e6);
    char buf[32];
    CU_ASSERT_STRING_EQUAL(lb_flops_text(1234567, buf, sizeof buf), "1.23M");
    CU_ASSERT_STRING_EQUAL(lb_flops_text(456000, buf, sizeof buf), "456k");
    CU_ASSERT_STRING_EQUAL(lb_flops_text(12, buf, sizeof buf), "12");
    CU_ASSERT_STRING_EQUAL(lb_flops_text(3.1e12, buf, sizeof buf), "3.1T");
}

/* A trainer counts its model at the data's length, each step's MFU follows from its
 * tokens and seconds, and metrics.csv's rows end with the MFU and the peak memory. */
static void test_trainer_reports_costs(void)
{
    char dir[128], data[192], csv[192];
    snprintf(dir, sizeof dir, "/tmp/lookback_test_costs_%d", (int)getpid());
    mkdir(dir, 0777);
    snprintf(data, sizeof data, "%s/spike.h5", dir);
    snprintf(csv, sizeof csv, "%s/metrics.csv", dir);
    lb_task_options o;
    lb_task_options_default(LB_TASK_SPIKE, &o);
    o.seq_len = 24, o.min_distance = 1, o.max_distance = 20, o.readings = 4;
    o.n_train = 64, o.n_val = 16, o.n_test = 16, o.seed = 3;
    CU_ASSERT_EQUAL_FATAL(lb_task_generate(&o, data, NULL, NULL), LB_OK);
    lb_dataset *ds = lb_dataset_open(data);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
    lb_model_config mc;
    lb_model_config_default(LB_MODEL_TRANSFORMER, &mc);
    CU_ASSERT_EQUAL(lb_model_config_fit_data(&mc, ds), LB_OK);
    mc.n_layers = 1, mc.d_model = 16, mc.n_heads = 2, mc.d_ff = 32;
    lb_model *m = lb_model_new(&mc);
    lb_train_config tc;
    lb_train_config_default(&tc);
    tc.steps = 4, tc.batch_size = 8, tc.eval_every = 2, tc.eval_examples = 16, tc.threads = 1;
    lb_trainer *t = lb_trainer_new(m, ds, &tc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    lb_model_flops f, expect;
    double rate = -1;
    CU_ASSERT_EQUAL(lb_trainer_costs(t, &f, &rate), LB_OK);
    CU_ASSERT_EQUAL(rate, 0);
    CU_ASSERT_EQUAL(lb_model_flops_count(&mc, 24, &expect), LB_OK);
    CU_ASSERT_EQUAL(f.seq_len, 24);
    CU_ASSERT_DOUBLE_EQUAL(f.training, expect.training, 0);
    lb_step_stats s;
    CU_ASSERT_EQUAL(lb_trainer_step(t, &s), LB_OK);
    CU_ASSERT_TRUE(isnan(s.mfu)); /* no rate yet */
    lb_trainer_set_sgemm_rate(t, 1e9);
    CU_ASSERT_EQUAL(lb_trainer_step(t, &s), LB_OK);
    CU_ASSERT_EQUAL(s.tokens, 8 * 24);
    CU_ASSERT_DOUBLE_EQUAL(s.mfu, f.training * (double)s.tokens / s.seconds / 1e9, 1e-9 * s.mfu);
    FILE *mf = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mf);
    fprintf(mf, "%s\n", lb_metrics_header_for(ds));
    CU_ASSERT_EQUAL(lb_trainer_run(t, NULL, mf, NULL, NULL), LB_OK);
    fclose(mf);
    mf = fopen(csv, "r");
    char line[1024];
    int rows = 0, train_rows = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(line, sizeof line, mf));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, ",mfu,peak_memory_mib\n"));
    while (fgets(line, sizeof line, mf)) {
        char *comma = strrchr(line, ',');
        *comma = '\0';
        double peak = atof(comma + 1), mfu = atof(strrchr(line, ',') + 1);
        CU_ASSERT_TRUE(peak > 1);
        if (strstr(line, ",train,")) {
            CU_ASSERT_TRUE(mfu > 0 && mfu < 100);
            train_rows++;
        } else {
            CU_ASSERT_PTR_NOT_NULL(strstr(line, ",nan")); /* validation rows: no MFU */
        }
        rows++;
    }
    fclose(mf);
    CU_ASSERT_EQUAL(rows, 2); /* step 4's train and val rows (2 steps were taken by hand) */
    CU_ASSERT_EQUAL(train_rows, 1);
    lb_trainer_set_sgemm_rate(t, NAN);
    CU_ASSERT_EQUAL(lb_trainer_costs(t, &f, &rate), LB_OK);
    CU_ASSERT_EQUAL(rate, 0);
    lb_trainer_free(t);
    lb_model_free(m);
    lb_dataset_close(ds);
    unlink(data);
    unlink(csv);
    rmdir(dir);
}

int main(void)
{
    static const lb_test_case cases[] = {
        {"transformer FLOPs by hand at two sizes", test_transformer_by_hand},
        {"local FLOPs by hand at two sizes", test_local_by_hand},
        {"lstm FLOPs by hand at two sizes", test_lstm_by_hand},
        {"conv FLOPs by hand at two sizes", test_conv_by_hand},
        {"linear FLOPs by hand at two sizes", test_linear_by_hand},
        {"mamba FLOPs by hand", test_mamba_by_hand},
        {"every family counts; bad arguments", test_every_family_counts},
        {"sgemm rate, MFU, peak memory, FLOP text", test_rate_mfu_and_text},
        {"the trainer's costs and metrics.csv", test_trainer_reports_costs},
        {NULL, NULL},
    };
    return lb_test_main("costs", cases);
}
