/* The API walk: every function of the installed headers (the declarations between
 * LB_API_BEGIN and LB_API_END, read at build time by tests/api_walk_gen.c) is called
 * once with NULL in each of its pointer arguments, the others given valid values where
 * the table below knows how to make one, and once with NULL in every pointer argument.
 * Each call runs in a forked child, so a crash (a signal, a sanitizer report) or a hang
 * is a failure naming the function and the argument. A function that returns a value
 * (a status, a pointer, a number) must also leave a message in lb_last_error(); a
 * function returning void must only not crash. Arguments documented as "may be NULL"
 * are listed in nullable[]: such a call is valid and is not made (the call with NULL in
 * every pointer is, and must not crash). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lookback.h"
#include "support.h"
#include "tensor/pool.h"

enum { WALK_MAX_POINTERS = 24 };

typedef struct walk_function {
    const char *name;
    int returns_value; /* non-void: must report its error */
    void (*call)(int null_arg);
    int n_pointers;
    struct {
        int index;
        const char *name;
    } pointers[WALK_MAX_POINTERS];
} walk_function;

static char data_path[1024];
static char work_dir[512];

/* ---- valid values by type (used in the forked child only; never freed) ---- */

static const char *canonical(const char *type, char *buf, size_t size) {
    /* drops "const " and spaces: "const lb_tensor *" -> "lb_tensor*" */
    size_t n = 0;
    for (const char *c = type; *c && n + 1 < size;) {
        if (strncmp(c, "const", 5) == 0 && (c[5] == ' ' || c[5] == '*')) {
            c += 5;
            continue;
        }
        if (*c != ' ')
            buf[n++] = *c;
        c++;
    }
    buf[n] = 0;
    return buf;
}

static void *zero_buffer(void) {
    /* room for any output struct, shape or name buffer the API writes */
    return calloc(1, 1 << 16);
}

/* A small spike task: the data file of the walk, and the options it passes. */
static void small_task_options(lb_task_options *o) {
    lb_task_options_default(LB_TASK_SPIKE, o);
    o->seq_len = 12;
    o->min_distance = 1;
    o->max_distance = 8;
    o->readings = 2;
    o->n_train = 16;
    o->n_val = 8;
    o->n_test = 8;
    o->seed = 3;
}

static lb_graph *walk_graph(void) {
    static lb_graph *g;
    if (!g)
        g = lb_graph_new();
    return g;
}

static lb_tensor *walk_tensor(void) {
    int64_t shape[2] = {2, 3};
    return lb_test_iota(LB_FLOAT64, 2, shape);
}

static lb_var *walk_var(void) { return lb_input(walk_graph(), walk_tensor(), 1); }

static lb_dataset *walk_dataset(void) { return lb_dataset_open(data_path); }

static lb_model_config *walk_model_config(void) {
    lb_model_config *mc = zero_buffer();
    lb_model_config_default(LB_MODEL_TRANSFORMER, mc);
    lb_dataset *ds = walk_dataset();
    if (ds) {
        mc->vocab_size = lb_dataset_vocab_size(ds);
        mc->num_classes = lb_dataset_num_classes(ds);
        mc->max_seq_len = lb_dataset_seq_len(ds);
    }
    mc->n_layers = 1;
    mc->d_model = 8;
    mc->n_heads = 2;
    mc->d_ff = 16;
    return mc;
}

static lb_train_config *walk_train_config(void) {
    lb_train_config *tc = zero_buffer();
    lb_train_config_default(tc);
    tc->steps = 1;
    tc->batch_size = 4;
    tc->eval_every = 0;
    tc->threads = 1;
    return tc;
}

static lb_model *walk_model(void) { return lb_model_new(walk_model_config()); }

void *walk_pointer(const char *type, const char *name);
void walk_value(void *out, size_t size, const char *type, const char *name);

void *walk_pointer(const char *type, const char *name) {
    char t[256];
    canonical(type, t, sizeof t);
    if (strstr(t, "(*"))
        return NULL; /* function pointers: only ever NULL */
    if (!strcmp(t, "lb_tensor*"))
        return walk_tensor();
    if (!strcmp(t, "lb_graph*"))
        return walk_graph();
    if (!strcmp(t, "lb_var*"))
        return walk_var();
    if (!strcmp(t, "lb_var**") || !strcmp(t, "lb_var*const*")) {
        lb_var **vs = zero_buffer();
        for (int i = 0; i < 4; i++)
            vs[i] = walk_var();
        return vs;
    }
    if (!strcmp(t, "char*") && strstr(name, "path"))
        return "walk_missing.h5";
    if (!strcmp(t, "char*") && strstr(type, "const"))
        return "train";
    if (!strcmp(t, "int64_t*") || !strcmp(t, "int*")) {
        int64_t *s = zero_buffer();
        int *si = (int *)s;
        for (int i = 0; i < 64; i++) {
            s[i] = 2 + (i % 2);
            si[i + 256] = 0;
        }
        if (!strcmp(t, "int*")) { /* a permutation of two dims */
            si[0] = 1;
            si[1] = 0;
        }
        return s;
    }
    if (!strcmp(t, "lb_rng*")) {
        lb_rng *r = zero_buffer();
        lb_rng_seed(r, 1);
        return r;
    }
    if (!strcmp(t, "lb_params*")) {
        lb_params *ps = zero_buffer();
        lb_params_init(ps);
        return ps;
    }
    if (!strcmp(t, "lb_dataset*"))
        return walk_dataset();
    if (!strcmp(t, "lb_model_config*"))
        return walk_model_config();
    if (!strcmp(t, "lb_model*"))
        return walk_model();
    if (!strcmp(t, "lb_train_config*"))
        return walk_train_config();
    if (!strcmp(t, "lb_trainer*"))
        return lb_trainer_new(walk_model(), walk_dataset(), walk_train_config());
    if (!strcmp(t, "lb_task_options*")) {
        lb_task_options *o = zero_buffer();
        small_task_options(o);
        return o;
    }
    if (!strcmp(t, "lb_loss_options*")) {
        lb_loss_options *o = zero_buffer();
        lb_loss_options_default(o);
        return o;
    }
    if (!strcmp(t, "lb_optim_config*")) {
        lb_optim_config *o = zero_buffer();
        *o = lb_optim_defaults(LB_OPTIM_ADAM);
        return o;
    }
    if (!strcmp(t, "lb_dist_config*")) {
        lb_dist_config *o = zero_buffer();
        lb_dist_config_default(o);
        return o;
    }
    if (!strcmp(t, "lb_gradcheck_options*")) {
        lb_gradcheck_options *o = zero_buffer();
        *o = lb_gradcheck_defaults();
        return o;
    }
    if (!strcmp(t, "lb_pool*"))
        return lb_pool_new();
    if (!strcmp(t, "lb_optim*")) {
        lb_var **vs = walk_pointer("lb_var **", "params");
        lb_optim_config cfg = lb_optim_defaults(LB_OPTIM_ADAM);
        return lb_optim_new(&cfg, vs, 1);
    }
    if (!strcmp(t, "lb_loader*"))
        return lb_loader_new(walk_dataset(), "train", 4, 1, 0, 1);
    if (!strcmp(t, "lb_model_state*"))
        return lb_model_state_new(walk_model(), 1, NULL);
    if (!strcmp(t, "lb_window_stream*"))
        return lb_window_stream_new(walk_model(), 1, NULL);
    /* plain data the function reads or fills in: any bytes are valid */
    static const char *const plain[] = {"char*", "void*", "double*", "float*", "uint8_t*", "lb_tensor**",
                                        "lb_eval_result*", "lb_step_stats*", "lb_pool_stats*", "lb_dist_stats*",
                                        "lb_task_kind*", "lb_schedule_kind*", "lb_pos_kind*", "lb_optim_kind*",
                                        "lb_model_kind*", "lb_loader_state*", "hid_t*", "lb_length_scale*",
                                        "lb_budget_clock*", NULL};
    for (int i = 0; plain[i]; i++)
        if (!strcmp(t, plain[i]))
            return zero_buffer();
    return NULL; /* no recipe for this type: NULL, as in the all-NULL call */
}

void walk_value(void *out, size_t size, const char *type, const char *name) {
    memset(out, 0, size);
    if (!strcmp(type, "int"))
        *(int *)out = 1;
    else if (!strcmp(type, "int64_t") || !strcmp(type, "long long"))
        *(int64_t *)out = 1;
    else if (!strcmp(type, "uint64_t") || !strcmp(type, "size_t"))
        *(uint64_t *)out = 64;
    else if (!strcmp(type, "double"))
        *(double *)out = 0.5;
    else if (!strcmp(type, "float"))
        *(float *)out = 0.5f;
    else if (!strcmp(type, "lb_dtype"))
        *(lb_dtype *)out = LB_FLOAT64;
}

#include "api_walk_calls.c"

/* Pointer arguments documented as "may be NULL" (the function then uses a default or
 * does without). Such a call must only not crash. */
static const struct {
    const char *function, *arg;
} nullable[] = {
    {"lb_attention", "mask"},          {"lb_attention", "queries"},        {"lb_attention", "weights"},
    {"lb_attention_fused", "mask"},    {"lb_masked_softmax", "mask"},      {"lb_max", "indices"},
    {"lb_grad_norm", "total_norm"},    {"lb_clip_grad_norm", "total_norm"}, {"lb_trainer_best", "metric"},
    {"lb_model_fields", "count"},      {"lb_train_fields", "count"},      {"lb_name_of", "fallback"},       {"lb_tensor_check_same_dtype", "op"},      {"lb_model_data_check", "trained_task"},
    {"lb_trainer_run", "checkpoint_path"}, {"lb_trainer_run", "metrics"},  {"lb_trainer_run", "user"},
    {"lb_trainer_run", "cb"},          {"lb_evaluate", "attention_out"},   {"lb_dataset_label_histogram", "ignored"},
    {"lb_model_state_new", "opt"},     {"lb_window_stream_new", "opt"},   {"lb_memory_free_bytes", "why"},
    {"lb_pool_use", "pool"},           {"lb_ffn_forward", "rng"},          {"lb_k_attention_set_isa", "name"}, {"lb_isa_set", "name"},
    {"lb_checked_mul", "out"},         {"lb_shape_numel", "numel"},        {"lb_param_new", "name"},
    {"lb_params_add", "prefix"},       {"lb_trainer_distribute", "cfg"},
    {"lb_gradcheck", "options"},       {"lb_gradcheck", "report"},         {"lb_param_name", "prefix"},
    {"lb_val_score", "higher_better"}, {"lb_trainer_solved_step", "score"},
    {"lb_sample_filter", "work"},      {"lb_sample_probs", "work"},        {"lb_sample_token", "work"},
    {"lb_generate", "out"},            {"lb_generate", "result"},
    {"lb_dataset_events_json", "len"}, {"lb_event_schema_same_reading", "why"},
    {"lb_trainer_class_weights", "weights"}, {"lb_model_events_check", "trained"},
    {"lb_model_events_check", "checkpoint"},
    {"lb_linear_attention", "gamma"},  {"lb_linear_attention", "state"},  {"lb_linear_attention", "valid"},
    {"lb_k_linear_attention_forward", "gamma"}, {"lb_k_linear_attention_forward", "state"},
    {"lb_k_linear_attention_forward", "valid"}, {"lb_k_linear_attention_backward", "gamma"},
    {"lb_k_linear_attention_backward", "dq"}, {"lb_k_linear_attention_backward", "dk"},
    {"lb_k_linear_attention_backward", "dv"},
    {"lb_k_selective_scan", "h0"},     {"lb_k_selective_scan", "valid"},   {"lb_k_selective_scan", "h_last"},
    {"lb_k_selective_scan_backward", "du"}, {"lb_k_selective_scan_backward", "ddelta"},
    {"lb_k_selective_scan_backward", "dA"}, {"lb_k_selective_scan_backward", "dB"},
    {"lb_k_selective_scan_backward", "dC"},
    {"lb_predictions_score", "targets"}, {"lb_predictions_score", "values"}, {"lb_vocab_encode_new", "text"},
    {"lb_rms_norm", "weight"},
    {NULL, NULL},
};

static int is_nullable(const char *function, const char *arg) {
    if (!strcmp(arg, "user"))
        return 1; /* a callback's data: handed back to the caller's callback, never read */
    for (int i = 0; nullable[i].function; i++)
        if (!strcmp(nullable[i].function, function) && !strcmp(nullable[i].arg, arg))
            return 1;
    return 0;
}

enum { CHILD_OK = 0, CHILD_SILENT = 3 };

/* Runs f with NULL in pointer argument null_arg (-2: every pointer) in a child;
 * returns CHILD_OK, CHILD_SILENT (no message), or 128 + signal (crash or hang). */
static int run_child(const walk_function *f, int null_arg, int must_report) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 1);
        if (chdir(work_dir) != 0)
            _exit(4);
        alarm(20);
        f->call(null_arg);
        _exit(must_report && lb_last_error()[0] == 0 ? CHILD_SILENT : CHILD_OK);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

static void test_walk(void) {
    int calls = 0, crashes = 0, silent = 0, functions = 0;
    for (const walk_function *f = walk_functions; f->name; f++) {
        if (f->n_pointers == 0)
            continue;
        functions++;
        for (int k = -1; k < f->n_pointers; k++) {
            int arg = k < 0 ? -2 : f->pointers[k].index;
            const char *arg_name = k < 0 ? "every pointer" : f->pointers[k].name;
            int nullable_arg = k >= 0 && is_nullable(f->name, arg_name);
            if (k < 0) { /* all NULL: excused only when every pointer may be NULL */
                nullable_arg = 1;
                for (int j = 0; j < f->n_pointers; j++)
                    nullable_arg &= is_nullable(f->name, f->pointers[j].name);
            }
            if (k >= 0 && nullable_arg)
                continue; /* a valid call (it may train or write a file): not what the walk checks */
            int rc = run_child(f, arg, f->returns_value && !nullable_arg);
            calls++;
            char msg[512];
            if (rc >= 128) {
                crashes++;
                snprintf(msg, sizeof msg, "%s with %s NULL: crashed (signal %d: %s)", f->name, arg_name, rc - 128,
                         strsignal(rc - 128));
                printf("\n  %s", msg);
                CU_assertImplementation(CU_FALSE, __LINE__, msg, __FILE__, "", CU_FALSE);
            } else if (rc == CHILD_SILENT) {
                silent++;
                snprintf(msg, sizeof msg, "%s with %s NULL: returned without a message in lb_last_error()",
                         f->name, arg_name);
                printf("\n  %s", msg);
                CU_assertImplementation(CU_FALSE, __LINE__, msg, __FILE__, "", CU_FALSE);
            } else if (rc != CHILD_OK) {
                snprintf(msg, sizeof msg, "%s with %s NULL: the child failed (exit %d)", f->name, arg_name, rc);
                CU_assertImplementation(CU_FALSE, __LINE__, msg, __FILE__, "", CU_FALSE);
            }
        }
    }
    printf("\n  walked %d functions with pointer arguments, %d calls: %d crashed, %d without a message\n",
           functions, calls, crashes, silent);
    CU_ASSERT_TRUE(functions > 200);
}

/* ---- edges beyond NULL: each call must be refused with an error, in a child so that a
 * crash (a double free, a sanitizer report, UBSan's overflow abort) is a failure too ---- */

/* Runs edge(), which returns 1 when the call was refused as it should be; 0: accepted or
 * refused wrongly; 128 + signal: crashed. */
static int run_edge(int (*edge)(void)) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        _exit(edge() ? 0 : 1);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status) == 0;
}

static int refused(lb_status want, const char *text) {
    int ok = lb_last_status() == want && strstr(lb_last_error(), text) != NULL;
    if (!ok)
        fprintf(stderr, "\n  status %d, message '%s' (wanted %d, '%s')\n", (int)lb_last_status(), lb_last_error(),
                (int)want, text);
    return ok;
}

static lb_model *edge_model(lb_model_kind kind, int64_t features) {
    lb_model_config *mc = walk_model_config();
    lb_model_config_default(kind, mc);
    mc->n_layers = 1;
    mc->d_model = 8;
    mc->n_heads = 2;
    mc->d_ff = 16;
    mc->hidden_size = 8;
    mc->vocab_size = features ? 0 : 10;
    mc->input_features = features;
    mc->num_classes = 4;
    mc->max_seq_len = 16;
    return lb_model_new(mc);
}

/* batch x seq_len that overflows int64 (UBSan would abort on the multiplication) */
static int edge_check_input_overflow(void) {
    lb_model *m = edge_model(LB_MODEL_LSTM, 0);
    int32_t tokens[4] = {0};
    lb_model_input in = {INT64_C(1) << 40, INT64_C(1) << 40, tokens, NULL, NULL};
    lb_clear_error();
    lb_var *y = lb_model_forward(lb_graph_new(), m, &in, 0, NULL, NULL);
    return y == NULL && refused(LB_ERR_VALUE, "overflow");
}

/* a token model given features as well: refused, not ignored; and the reverse */
static int edge_token_model_features(void) {
    lb_model *m = edge_model(LB_MODEL_LSTM, 0);
    int32_t tokens[2 * 3] = {1, 2, 3, 4, 5, 6};
    const int64_t shape[3] = {2, 3, 5};
    lb_model_input in = {2, 3, tokens, lb_tensor_zeros(LB_FLOAT32, 3, shape), NULL};
    lb_clear_error();
    if (lb_model_forward(lb_graph_new(), m, &in, 0, NULL, NULL) || !refused(LB_ERR_VALUE, "features must be NULL"))
        return 0;
    lb_model *f = edge_model(LB_MODEL_LSTM, 5);
    lb_clear_error();
    return lb_model_forward(lb_graph_new(), f, &in, 0, NULL, NULL) == NULL && refused(LB_ERR_VALUE, "tokens must be NULL");
}

/* the same tensor given to lb_input twice: the second is refused; freeing the graph
 * frees it once */
static int edge_input_twice(void) {
    lb_graph *g = lb_graph_new();
    const int64_t shape[1] = {3};
    lb_tensor *t = lb_tensor_zeros(LB_FLOAT32, 1, shape);
    if (!lb_input(g, t, 0))
        return 0;
    lb_clear_error();
    int ok = lb_input(g, t, 0) == NULL && refused(LB_ERR_STATE, "given to the graph already");
    lb_graph_free(g);
    return ok;
}

/* stream indices outside [0, B): an error for reset, events and bytes */
static int edge_stream_index(void) {
    lb_model *m = edge_model(LB_MODEL_LSTM, 0);
    lb_model_state *s = lb_model_state_new(m, 2, NULL);
    if (!s)
        return 0;
    lb_clear_error();
    lb_model_state_reset(s, 2);
    if (!refused(LB_ERR_VALUE, "stream 2 is outside [0, 2)"))
        return 0;
    lb_clear_error();
    lb_model_state_reset(s, -7);
    if (!refused(LB_ERR_VALUE, "stream -7"))
        return 0;
    lb_clear_error();
    if (lb_model_state_events(s, 5) != -1 || !refused(LB_ERR_VALUE, "lb_model_state_events: stream 5"))
        return 0;
    lb_clear_error();
    if (lb_model_state_bytes(s, -1) != 0 || !refused(LB_ERR_VALUE, "lb_model_state_bytes: stream -1"))
        return 0;
    lb_clear_error();
    lb_model_state_reset(s, -1); /* every stream: valid */
    return lb_last_status() == LB_OK && lb_model_state_events(s, 1) == 0;
}

/* copying into an expanded (stride-0) view: refused, the storage unchanged */
static int edge_copy_into_expanded(void) {
    const int64_t one[2] = {1, 3}, four[2] = {4, 3};
    lb_tensor *row = lb_tensor_zeros(LB_FLOAT32, 2, one);
    lb_tensor *view = lb_tensor_expand(row, 2, four);
    lb_tensor *src = lb_test_iota(LB_FLOAT32, 2, four);
    lb_clear_error();
    if (!view || lb_tensor_copy_into(view, src) != LB_ERR_VALUE || !refused(LB_ERR_VALUE, "stride 0"))
        return 0;
    const int64_t at[2] = {0, 1};
    return lb_tensor_get(row, at) == 0.0;
}

/* lb_tensor_from_data without values: an error, not zeros */
static int edge_from_data_null(void) {
    const int64_t shape[1] = {4};
    lb_clear_error();
    return lb_tensor_from_data(LB_FLOAT32, 1, shape, NULL) == NULL && refused(LB_ERR_VALUE, "values is NULL");
}

static void test_edges(void) {
    static const struct {
        const char *name;
        int (*edge)(void);
    } edges[] = {
        {"lb_model_forward: batch x seq_len overflowing int64", edge_check_input_overflow},
        {"lb_model_forward: a token model given features, a feature model given tokens", edge_token_model_features},
        {"lb_input: the same tensor twice", edge_input_twice},
        {"lb_model_state_reset/_events/_bytes: a stream outside [0, B)", edge_stream_index},
        {"lb_tensor_copy_into: an expanded (stride-0) destination", edge_copy_into_expanded},
        {"lb_tensor_from_data: values NULL", edge_from_data_null},
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        int rc = run_edge(edges[i].edge);
        if (rc != 1)
            fprintf(stderr, "\n  %s: %s\n", edges[i].name,
                    rc >= 128 ? strsignal(rc - 128) : "not refused with the expected error");
        CU_ASSERT_EQUAL(rc, 1);
    }
}

static void make_data(void) {
    snprintf(work_dir, sizeof work_dir, "/tmp/lookback_test_api_walk_%d", (int)getpid());
    mkdir(work_dir, 0777);
    snprintf(data_path, sizeof data_path, "%s/spike.h5", work_dir);
    lb_task_options o;
    small_task_options(&o);
    if (lb_task_generate(&o, data_path, NULL, NULL) != LB_OK)
        fprintf(stderr, "generate: %s\n", lb_last_error());
}

int main(void) {
    make_data();
    static const lb_test_case cases[] = {{"walk", test_walk}, {"edges refused with an error", test_edges}, {NULL, NULL}};
    int rc = lb_test_main("api_walk", cases);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", work_dir);
    return rc;
}
