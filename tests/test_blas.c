/* The BLAS under lookback (tensor/blas.h): kernels that match the CPU, a user's
 * OPENBLAS_CORETYPE kept, the report a performance note needs. */
#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tensor/blas.h"
#include "tensor/blas_internal.h"
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
        {NULL, NULL},
    };
    return lb_test_main("blas", cases);
}
