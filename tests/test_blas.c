/* The BLAS under lookback (tensor/blas.h): kernels that match the CPU, a user's
 * OPENBLAS_CORETYPE kept, the report a performance note needs; the fast products
 * (kernels/gemm.h, the tile product) against the plain triple loop (tensor/kernels.h). */
#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/gemm.h"
#include "kernels/tile_gemm_internal.h"
#include "tensor/blas.h"
#include "tensor/blas_internal.h"
#include "tensor/isa.h"
#include "tensor/kernels.h"
#include "tensor/threads.h"
#include "support.h"

/* A child's view, printed by this program started with --print-blas:
 * "<core> <choice> <OPENBLAS_CORETYPE or -> <blas threads>" */
static int print_blas(void)
{
    lb_blas_report r;
    lb_blas_info(&r);
    const char *env = getenv("OPENBLAS_CORETYPE");
    printf("%s %s %s %d\n", r.core, r.core_choice_name, env ? env : "-", r.blas_threads);
    return 0;
}

/* Runs this test program with --print-blas under `env_prefix` (an `env` argument list). */
static int child_blas(const char *env_prefix, char *out, size_t size)
{
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return -1;
    self[len] = '\0';
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "env %s '%s' --print-blas", env_prefix, self);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    out[0] = '\0';
    if (!fgets(out, (int)size, p))
        out[0] = '\0';
    int st = pclose(p);
    out[strcspn(out, "\n")] = '\0';
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A CPU with AVX2 or AVX-512 runs OpenBLAS kernels of its own class, never an SSE
 * fallback such as Prescott (unless the user asked for one: ctest sets no
 * OPENBLAS_CORETYPE). */
static void test_core_matches_cpu(void)
{
    lb_blas_report r;
    lb_blas_info(&r);
    int cpu = lb_blas_cpu_class();
    printf("\n  %s | core %s, detected %s, %s, CPU %s\n  ", r.library, r.core, r.core_detected, r.core_choice_name,
           r.cpu_isa);
    if (getenv("OPENBLAS_CORETYPE")) {
        CU_ASSERT_EQUAL(r.core_choice, LB_BLAS_CORE_USER);
        return;
    }
    int core = lb_blas_core_class(r.core);
    CU_ASSERT_NOT_EQUAL(core, LB_ISA_UNKNOWN);
    if (cpu >= LB_ISA_AVX2) {
        CU_ASSERT_TRUE(core >= LB_ISA_AVX2);
        CU_ASSERT_EQUAL(core, cpu);
    }
    CU_ASSERT_EQUAL(r.core_choice, strcmp(r.core, r.core_detected) == 0 ? LB_BLAS_CORE_DETECTED
                                                                         : LB_BLAS_CORE_CORRECTED);
    CU_ASSERT_TRUE(strlen(r.version) > 0 && strstr(r.library, r.version) != NULL);
    CU_ASSERT_EQUAL(r.blas_threads, 1);
    CU_ASSERT_TRUE(r.threads >= 1);
    CU_ASSERT_PTR_NOT_NULL(r.attention_isa);
    char line[512];
    int n = lb_blas_describe(&r, line, sizeof line);
    CU_ASSERT_TRUE(n > 0 && (size_t)n < sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, r.core));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, r.attention_isa));
    char tiny[8];
    CU_ASSERT_EQUAL(lb_blas_describe(&r, tiny, sizeof tiny), n); /* truncated, terminated, full length */
    CU_ASSERT_EQUAL(strlen(tiny), sizeof tiny - 1);
}

/* Which core replaces which: by instruction-set class, names OpenBLAS 0.3.21 accepts. */
static void test_core_choice_table(void)
{
    CU_ASSERT_STRING_EQUAL(lb_blas_core_to_force("Prescott", LB_ISA_AVX512), "SkylakeX");
    CU_ASSERT_STRING_EQUAL(lb_blas_core_to_force("PRESCOTT", LB_ISA_AVX2), "Haswell");
    CU_ASSERT_STRING_EQUAL(lb_blas_core_to_force("Katmai", LB_ISA_AVX), "Sandybridge");
    CU_ASSERT_STRING_EQUAL(lb_blas_core_to_force("Nehalem", LB_ISA_AVX512), "SkylakeX");
    CU_ASSERT_STRING_EQUAL(lb_blas_core_to_force("Zen", LB_ISA_AVX512), "SkylakeX");
    CU_ASSERT_STRING_EQUAL(lb_blas_core_to_force("Sandybridge", LB_ISA_AVX2), "Haswell");
    CU_ASSERT_PTR_NULL(lb_blas_core_to_force("Haswell", LB_ISA_AVX2));
    CU_ASSERT_PTR_NULL(lb_blas_core_to_force("Cooperlake", LB_ISA_AVX512));
    CU_ASSERT_PTR_NULL(lb_blas_core_to_force("SkylakeX", LB_ISA_AVX2)); /* newer than the CPU: not ours to judge */
    CU_ASSERT_PTR_NULL(lb_blas_core_to_force("Prescott", LB_ISA_SSE));
    CU_ASSERT_PTR_NULL(lb_blas_core_to_force("ARMV8", LB_ISA_AVX512)); /* unknown names stay */
    CU_ASSERT_PTR_NULL(lb_blas_core_to_force(NULL, LB_ISA_AVX512));
    CU_ASSERT_PTR_NULL(lb_blas_core_to_force("Prescott", LB_ISA_UNKNOWN));
    CU_ASSERT_EQUAL(lb_blas_core_class("Cooperlake"), LB_ISA_AVX512);
    CU_ASSERT_EQUAL(lb_blas_core_class("haswell"), LB_ISA_AVX2);
    CU_ASSERT_EQUAL(lb_blas_core_class("Prescott"), LB_ISA_SSE);
    CU_ASSERT_EQUAL(lb_blas_core_class("Unknown"), LB_ISA_UNKNOWN);
}

static int dlsym_available(void) { return dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init") != NULL; }

/* c = a b for a [m, k], b [k, n], in double. */
static double max_gemm_error(int m, int n, int k)
{
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n), *c = calloc((size_t)m * n, 4);
    for (int i = 0; i < m * k; i++)
        a[i] = (float)((i * 37 % 101) - 50) / 64.0f;
    for (int i = 0; i < k * n; i++)
        b[i] = (float)((i * 53 % 97) - 48) / 32.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    double worst = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (double)a[i * k + p] * b[p * n + j];
            worst = fmax(worst, fabs(s - c[i * n + j]));
        }
    free(a);
    free(b);
    free(c);
    return worst;
}

/* The correction itself, on this machine: a process whose OpenBLAS runs the Prescott
 * kernels (as 0.3.21 picks on a CPU it does not know) gets the CPU's class back, and
 * the products stay right. In a child process, so the tests' own BLAS is untouched. */
static void test_correction_from_prescott(void)
{
    int cpu = lb_blas_cpu_class();
    if (cpu < LB_ISA_AVX || getenv("OPENBLAS_CORETYPE") || !dlsym_available()) {
        printf("(nothing to correct on this CPU or BLAS) ");
        return;
    }
    pid_t pid = fork();
    CU_ASSERT_TRUE_FATAL(pid >= 0);
    if (pid == 0) {
        int fail = 0;
        if (lb_blas_switch_core("Prescott") != 0 || strcasecmp(openblas_get_corename(), "Prescott") != 0)
            fail |= 1;
        if (getenv("OPENBLAS_CORETYPE") != NULL) /* the variable does not outlive the switch */
            fail |= 2;
        if (max_gemm_error(67, 45, 131) > 1e-3)
            fail |= 4;
        const char *to = lb_blas_correct_core();
        if (!to || lb_blas_core_class(openblas_get_corename()) != cpu || getenv("OPENBLAS_CORETYPE") != NULL)
            fail |= 8;
        if (max_gemm_error(67, 45, 131) > 1e-3 || max_gemm_error(300, 200, 90) > 1e-3)
            fail |= 16;
        if (lb_blas_correct_core() != NULL) /* nothing left to correct */
            fail |= 32;
        _exit(fail);
    }
    int st = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
    CU_ASSERT_TRUE(WIFEXITED(st));
    CU_ASSERT_EQUAL(WEXITSTATUS(st), 0);
}

/* A user's OPENBLAS_CORETYPE is kept, even an older core than the CPU's; without one,
 * a child process gets the CPU's class and no variable in its environment. */
static void test_user_coretype_kept(void)
{
    char out[256];
    CU_ASSERT_EQUAL(child_blas("OPENBLAS_CORETYPE=Haswell", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "Haswell OPENBLAS_CORETYPE Haswell 1");
    CU_ASSERT_EQUAL(child_blas("OPENBLAS_CORETYPE=Prescott", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "Prescott OPENBLAS_CORETYPE Prescott 1");
    CU_ASSERT_EQUAL(child_blas("-u OPENBLAS_CORETYPE", out, sizeof out), 0);
    char core[64] = "", choice[64] = "", env[64] = "";
    int threads = 0;
    CU_ASSERT_EQUAL(sscanf(out, "%63s %63s %63s %d", core, choice, env, &threads), 4);
    CU_ASSERT_STRING_EQUAL(env, "-");
    CU_ASSERT_EQUAL(threads, 1);
    CU_ASSERT_TRUE(strcmp(choice, "detected") == 0 || strcmp(choice, "corrected") == 0);
    if (lb_blas_cpu_class() >= LB_ISA_AVX2)
        CU_ASSERT_EQUAL(lb_blas_core_class(core), lb_blas_cpu_class());
}

/* LOOKBACK_ISA=avx2 on a CPU with AVX-512 runs OpenBLAS's AVX2 core too (the whole
 * process as on an AVX2 machine); a user's OPENBLAS_CORETYPE still wins. */
static void test_isa_avx2_core(void)
{
    char out[256];
    if (lb_blas_cpu_class() < LB_ISA_AVX512) {
        printf("(no AVX-512 here: nothing to check) ");
        return;
    }
    CU_ASSERT_EQUAL(child_blas("-u OPENBLAS_CORETYPE LOOKBACK_ISA=avx2", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "Haswell LOOKBACK_ISA - 1");
    CU_ASSERT_EQUAL(child_blas("OPENBLAS_CORETYPE=SkylakeX LOOKBACK_ISA=avx2", out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "SkylakeX OPENBLAS_CORETYPE SkylakeX 1");
    CU_ASSERT_EQUAL(child_blas("-u OPENBLAS_CORETYPE LOOKBACK_ISA=avx512", out, sizeof out), 0);
    CU_ASSERT_EQUAL(strncmp(out, "SkylakeX ", 9) == 0 || strncmp(out, "Cooperlake ", 11) == 0, 1);
}

/* One product c [m, n] = alpha op(a) op(b) + beta c of `dtype` with padded row strides,
 * by the fast path `fast` (0: lb_k_gemm, 1: the tile product) and by lb_k_gemm_plain;
 * returns the largest |fast - plain| / (Σ_l |a_il b_lj| + 1), or -1 when the padding
 * past n columns was written or beta = 0 let c's NaN through. */
static double gemm_gap(lb_dtype dtype, int fast, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                       double beta)
{
    const size_t es = lb_dtype_size(dtype);
    const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
    const int64_t a_n = (ta ? k : m) * lda, b_n = (tb ? n : k) * ldb, c_n = m * ldc;
    char *a = malloc((size_t)a_n * es), *b = malloc((size_t)b_n * es), *c[2] = {malloc((size_t)c_n * es),
                                                                                 malloc((size_t)c_n * es)};
    /* values exact in float32, of both signs, no two rows alike */
    for (int64_t i = 0; i < a_n + b_n + c_n; i++) {
        double v = (double)((i * 7919 % 211) - 105) / 64.0, c_v = beta == 0 ? NAN : v;
        char *at = i < a_n ? a + i * es : i < a_n + b_n ? b + (i - a_n) * es : c[0] + (i - a_n - b_n) * es;
        double put = i < a_n + b_n ? v : c_v;
        if (dtype == LB_FLOAT32)
            *(float *)at = (float)put;
        else
            *(double *)at = put;
    }
    memcpy(c[1], c[0], (size_t)c_n * es);
    if (fast) {
        CU_ASSERT_EQUAL(lb_k_tile_gemm_f32(m, n, k, (float)alpha, (const float *)a, ta ? 1 : lda, ta ? lda : 1,
                                           (const float *)b, ldb, beta == 1, (float *)c[0], ldc), 1);
    } else {
        lb_k_gemm(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c[0], ldc);
    }
    lb_k_gemm_plain(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c[1], ldc);
    double worst = 0;
#define AT(p, i) (dtype == LB_FLOAT32 ? (double)((const float *)(p))[i] : ((const double *)(p))[i])
    for (int64_t i = 0; i < m && worst >= 0; i++)
        for (int64_t j = 0; j < ldc; j++) {
            double got = AT(c[0], i * ldc + j), want = AT(c[1], i * ldc + j), mag = 1;
            if (j >= n) { /* padding: untouched by both */
                if (memcmp(c[0] + (i * ldc + j) * es, c[1] + (i * ldc + j) * es, es) != 0)
                    worst = -1;
                continue;
            }
            for (int64_t l = 0; l < k; l++)
                mag += fabs(AT(a, ta ? l * lda + i : i * lda + l) * AT(b, tb ? j * ldb + l : l * ldb + j));
            if (isnan(got) || isnan(want))
                worst = -1;
            else if (fabs(got - want) / mag > worst)
                worst = fabs(got - want) / mag;
        }
#undef AT
    free(a);
    free(b);
    free(c[0]);
    free(c[1]);
    return worst;
}

/* lb_k_gemm, in float32 and float64, every transpose, beta 0 and 1, on the tile
 * micro-kernel (narrow float32 products, when the build has it) and on OpenBLAS (the
 * rest, and every product in the "generic" build), and the tile product itself, all
 * against the plain triple loop on shapes that are not square. */
static void test_gemm_matches_plain(void)
{
    static const int64_t shapes[][3] = {/* m, n, k */
                                        {3, 5, 7},   {17, 4, 33},  {1, 9, 2},   {40, 64, 64}, {70, 130, 20},
                                        {9, 33, 1},  {64, 61, 600}, {2, 3, 1100}};
    int checked = 0;
    for (int isa = 0; isa < 2; isa++) {
        CU_ASSERT_EQUAL_FATAL(lb_isa_set(isa ? "generic" : "auto"), LB_OK);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int t = 0; t < 8; t++) { /* trans_a, trans_b, beta */
                int ta = t & 1, tb = (t >> 1) & 1;
                double beta = t >> 2, alpha = 0.75;
                const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                double f32 = gemm_gap(LB_FLOAT32, 0, ta, tb, m, n, k, alpha, beta);
                double f64 = gemm_gap(LB_FLOAT64, 0, ta, tb, m, n, k, alpha, beta);
                CU_ASSERT(f32 >= 0 && f32 <= 1e-6);
                CU_ASSERT(f64 >= 0 && f64 <= 1e-14);
                if (!isa && !tb && lb_k_tile_gemm_ready()) {
                    double tile = gemm_gap(LB_FLOAT32, 1, ta, 0, m, n, k, alpha, beta);
                    CU_ASSERT(tile >= 0 && tile <= 1e-6);
                    checked++;
                }
                if (f32 < 0 || f32 > 1e-6 || f64 < 0 || f64 > 1e-14)
                    printf("\n  %s m %lld n %lld k %lld trans %d %d beta %g: float32 %g float64 %g", isa ? "generic" : "auto",
                           (long long)m, (long long)n, (long long)k, ta, tb, beta, f32, f64);
            }
    }
    CU_ASSERT_EQUAL(lb_isa_set("auto"), LB_OK);
    if (!checked)
        printf("(no tile micro-kernel in this build: the tile product not checked) ");
}

/* The plain product itself on a 2 x 3 by 3 x 2 product worked by hand, and a wrong
 * answer is seen: the check above could fail. */
static void test_gemm_plain_by_hand(void)
{
    const double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12}; /* [2, 3], [3, 2] */
    double c[4] = {1, 1, 1, 1}, bt_c[4] = {0, 0, 0, 0};
    lb_k_gemm_plain(LB_FLOAT64, 0, 0, 2, 2, 3, 1.0, a, 3, b, 2, 1.0, c, 2);
    CU_ASSERT_DOUBLE_EQUAL(c[0], 59, 0);
    CU_ASSERT_DOUBLE_EQUAL(c[1], 65, 0);
    CU_ASSERT_DOUBLE_EQUAL(c[2], 140, 0);
    CU_ASSERT_DOUBLE_EQUAL(c[3], 155, 0);
    /* aᵀ (a read as [3, 2] stored) times bᵀ (b read as [2, 3] stored): [2, 2] */
    lb_k_gemm_plain(LB_FLOAT64, 1, 1, 2, 2, 3, 2.0, a, 2, b, 3, 0.0, bt_c, 2);
    CU_ASSERT_DOUBLE_EQUAL(bt_c[0], 2 * (1 * 7 + 3 * 8 + 5 * 9), 0);
    CU_ASSERT_DOUBLE_EQUAL(bt_c[1], 2 * (1 * 10 + 3 * 11 + 5 * 12), 0);
    CU_ASSERT_DOUBLE_EQUAL(bt_c[3], 2 * (2 * 10 + 4 * 11 + 6 * 12), 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--print-blas") == 0)
        return print_blas();
    const lb_test_case cases[] = {
        {"the core in use matches the CPU's class (no SSE fallback)", test_core_matches_cpu},
        {"which core replaces which", test_core_choice_table},
        {"a process on Prescott kernels gets the CPU's class back", test_correction_from_prescott},
        {"a user's OPENBLAS_CORETYPE is kept", test_user_coretype_kept},
        {"LOOKBACK_ISA=avx2 runs OpenBLAS's AVX2 core", test_isa_avx2_core},
        {"the plain product, worked by hand", test_gemm_plain_by_hand},
        {"lb_k_gemm and the tile product against the plain product", test_gemm_matches_plain},
        {NULL, NULL},
    };
    return lb_test_main("blas", cases);
}
