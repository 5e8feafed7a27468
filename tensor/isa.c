#include "tensor/isa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[LB_N_BUILDS] = {"generic", "avx2", "avx512"};

int lb_isa_cpu_runs(lb_isa_build build)
{
    if (build == LB_BUILD_GENERIC)
        return 1;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("fma"))
        return 0;
    if (build == LB_BUILD_AVX2)
        return __builtin_cpu_supports("avx2") ? 1 : 0;
    if (build == LB_BUILD_AVX512)
        return __builtin_cpu_supports("avx512f") ? 1 : 0;
#endif
    return 0;
}

const char *lb_isa_name(lb_isa_build build)
{
    return (int)build >= 0 && (int)build < (int)LB_N_BUILDS ? NAMES[build] : "unknown";
}

/* The best build of this CPU, and LOOKBACK_ISA's when it is usable (-1 otherwise). */
static lb_isa_build best_build = LB_BUILD_GENERIC;
static int env_build = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* A program's lb_isa_set choice, or -1. */
static volatile int forced = -1;

static int parse(const char *name)
{
    for (int i = 0; i < LB_N_BUILDS; i++)
        if (strcmp(name, NAMES[i]) == 0)
            return i;
    return -1;
}

static void init(void)
{
    best_build = LB_BUILD_GENERIC;
    for (int i = LB_N_BUILDS - 1; i > 0; i--)
        if (lb_isa_cpu_runs((lb_isa_build)i)) {
            best_build = (lb_isa_build)i;
            break;
        }
    const char *env = getenv("LOOKBACK_ISA");
    int b = env && *env ? parse(env) : -1;
    env_build = b >= 0 && lb_isa_cpu_runs((lb_isa_build)b) ? b : -1;
}

lb_isa_build lb_isa(void)
{
    pthread_once(&once, init);
    int f = forced;
    if (f >= 0)
        return (lb_isa_build)f;
    return env_build >= 0 ? (lb_isa_build)env_build : best_build;
}

lb_status lb_isa_set(const char *name)
{
    pthread_once(&once, init);
    if (!name || strcmp(name, "auto") == 0) {
        forced = -1;
        return LB_OK;
    }
    int b = parse(name);
    if (b < 0)
        return lb_error(LB_ERR_VALUE,
                        "instruction-set build \"%s\" is unknown (avx512, avx2, generic or auto; the x86 builds exist "
                        "on x86-64 only)",
                        name);
    if (!lb_isa_cpu_runs((lb_isa_build)b))
        return lb_error(LB_ERR_VALUE, "this CPU cannot run the \"%s\" build (it runs up to \"%s\")", name,
                        NAMES[best_build]);
    forced = b;
    return LB_OK;
}

lb_status lb_isa_env_check(void)
{
    pthread_once(&once, init);
    const char *env = getenv("LOOKBACK_ISA");
    if (!env || !*env || strcmp(env, "auto") == 0)
        return LB_OK;
    int b = parse(env);
    if (b < 0)
        return lb_error(LB_ERR_VALUE, "LOOKBACK_ISA=%s: unknown build (avx512, avx2, generic or auto)", env);
    if (!lb_isa_cpu_runs((lb_isa_build)b))
        return lb_error(LB_ERR_VALUE, "LOOKBACK_ISA=%s: this CPU cannot run that build (it runs up to %s)", env,
                        NAMES[best_build]);
    return LB_OK;
}
