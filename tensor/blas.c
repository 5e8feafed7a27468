#include "tensor/blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "tensor/isa.h"
#include "tensor/blas_internal.h"
#include "tensor/error.h"
#include "tensor/threads.h"

/* OpenBLAS's x86-64 core names (driver/others/dynamic.c, corename[]) by class. */
static const struct {
    const char *name;
    int isa;
} CORES[] = {
    {"Katmai", LB_ISA_SSE},        {"Coppermine", LB_ISA_SSE},   {"Northwood", LB_ISA_SSE},
    {"Prescott", LB_ISA_SSE},      {"Banias", LB_ISA_SSE},       {"Atom", LB_ISA_SSE},
    {"Core2", LB_ISA_SSE},         {"Penryn", LB_ISA_SSE},       {"Dunnington", LB_ISA_SSE},
    {"Nehalem", LB_ISA_SSE},       {"Athlon", LB_ISA_SSE},       {"Opteron", LB_ISA_SSE},
    {"Opteron_SSE3", LB_ISA_SSE},  {"Barcelona", LB_ISA_SSE},    {"Nano", LB_ISA_SSE},
    {"Bobcat", LB_ISA_SSE},        {"Sandybridge", LB_ISA_AVX},  {"Bulldozer", LB_ISA_AVX},
    {"Piledriver", LB_ISA_AVX},    {"Steamroller", LB_ISA_AVX},  {"Haswell", LB_ISA_AVX2},
    {"Excavator", LB_ISA_AVX2},    {"Zen", LB_ISA_AVX2},         {"SkylakeX", LB_ISA_AVX512},
    {"Cooperlake", LB_ISA_AVX512}, {"SapphireRapids", LB_ISA_AVX512},
};

/* The core asked for per class: names every OpenBLAS with DYNAMIC_ARCH since 0.3.x
 * accepts in OPENBLAS_CORETYPE ("Cooperlake" is not found by 0.3.21's lookup). */
static const char *const FORCE[] = {NULL, "Sandybridge", "Haswell", "SkylakeX"};
static const char *const ISA_NAMES[] = {"sse", "avx", "avx2", "avx512"};

int lb_blas_core_class(const char *core)
{
    if (!core)
        return LB_ISA_UNKNOWN;
    for (size_t i = 0; i < sizeof CORES / sizeof CORES[0]; i++)
        if (strcasecmp(core, CORES[i].name) == 0)
            return CORES[i].isa;
    return LB_ISA_UNKNOWN;
}

int lb_blas_cpu_class(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    /* libgcc's checks include the OS's support (XCR0) for the AVX and AVX-512 state. */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return LB_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return LB_ISA_AVX2;
    if (__builtin_cpu_supports("avx"))
        return LB_ISA_AVX;
    return LB_ISA_SSE;
#else
    return LB_ISA_UNKNOWN;
#endif
}

const char *lb_blas_core_to_force(const char *core, int cpu_class)
{
    int have = lb_blas_core_class(core);
    if (have == LB_ISA_UNKNOWN || cpu_class <= have || cpu_class > LB_ISA_AVX512)
        return NULL;
    return FORCE[cpu_class];
}

int lb_blas_switch_core(const char *name)
{
    /* Exported by DYNAMIC_ARCH builds of OpenBLAS (Debian's among them), but not an
     * API: looked up at run time so that any other BLAS links and runs unchanged. */
    void (*quit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
    void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
    if (!quit || !init || !name)
        return -1;
    const char *old = getenv("OPENBLAS_CORETYPE");
    char *saved = old ? strdup(old) : NULL;
    setenv("OPENBLAS_CORETYPE", name, 1);
    quit();
    init();
    if (saved) {
        setenv("OPENBLAS_CORETYPE", saved, 1);
        free(saved);
    } else {
        unsetenv("OPENBLAS_CORETYPE");
    }
    return 0;
}

static char core_at_load[32] = "";
static lb_blas_core_choice choice = LB_BLAS_CORE_DETECTED;
static int user_coretype = 0;

const char *lb_blas_correct_core(void)
{
    const char *user = getenv("OPENBLAS_CORETYPE");
    if (user && *user) {
        user_coretype = 1;
        choice = LB_BLAS_CORE_USER;
        return NULL;
    }
    /* LOOKBACK_ISA=avx2 on a CPU with AVX-512: OpenBLAS runs its AVX2 kernels too, as on
     * an AVX2 machine (tensor/isa.h) */
    const char *isa = getenv("LOOKBACK_ISA");
    const char *core = openblas_get_corename();
    if (isa && strcmp(isa, "avx2") == 0 && lb_isa_cpu_runs(LB_BUILD_AVX2) &&
        lb_blas_core_class(core) > LB_ISA_AVX2) {
        if (lb_blas_switch_core(FORCE[LB_ISA_AVX2]) != 0)
            return NULL;
        choice = LB_BLAS_CORE_ISA;
        return FORCE[LB_ISA_AVX2];
    }
    int cpu = lb_blas_cpu_class();
    if (isa && strcmp(isa, "avx2") == 0 && cpu > LB_ISA_AVX2)
        cpu = LB_ISA_AVX2;
    const char *want = lb_blas_core_to_force(core, cpu);
    if (!want || lb_blas_switch_core(want) != 0)
        return NULL;
    choice = LB_BLAS_CORE_CORRECTED;
    return want;
}

static pthread_once_t core_once = PTHREAD_ONCE_INIT;
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;

static void correct_once(void)
{
    snprintf(core_at_load, sizeof core_at_load, "%s", openblas_get_corename());
    lb_blas_correct_core();
}

static void single_thread_once(void) { openblas_set_num_threads(1); }

/* At load, before any product and (in practice) before the program starts threads
 * that could read the environment meanwhile. */
__attribute__((constructor)) static void blas_at_load(void) { pthread_once(&core_once, correct_once); }

void lb_blas_init(void)
{
    pthread_once(&core_once, correct_once);
    pthread_once(&threads_once, single_thread_once);
}

void lb_blas_info(lb_blas_report *out)
{
    if (!out)
        return;
    lb_blas_init();
    memset(out, 0, sizeof *out);
    const char *config = openblas_get_config();
    snprintf(out->library, sizeof out->library, "%s", config ? config : "unknown");
    /* "OpenBLAS 0.3.21 ...": the second word when it starts with a digit */
    const char *v = config ? strchr(config, ' ') : NULL;
    if (v && v[1] >= '0' && v[1] <= '9') {
        size_t len = strcspn(v + 1, " ");
        snprintf(out->version, sizeof out->version, "%.*s", (int)(len < 31 ? len : 31), v + 1);
    } else {
        snprintf(out->version, sizeof out->version, "unknown");
    }
    snprintf(out->core, sizeof out->core, "%s", openblas_get_corename());
    snprintf(out->core_detected, sizeof out->core_detected, "%s", core_at_load[0] ? core_at_load : out->core);
    out->core_choice = choice;
    out->core_choice_name = choice == LB_BLAS_CORE_USER        ? "OPENBLAS_CORETYPE"
                            : choice == LB_BLAS_CORE_CORRECTED ? "corrected"
                            : choice == LB_BLAS_CORE_ISA       ? "LOOKBACK_ISA"
                                                               : "detected";
    int cpu = lb_blas_cpu_class();
    out->cpu_isa = cpu >= 0 ? ISA_NAMES[cpu] : "unknown";
    int par = openblas_get_parallel();
    out->threading = par == 1 ? "pthreads" : par == 2 ? "openmp" : "sequential";
    out->blas_threads = openblas_get_num_threads();
    out->threads = lb_get_num_threads();
    out->attention_isa = lb_isa_name(lb_isa());
}

int lb_blas_describe(const lb_blas_report *r, char *buf, size_t size)
{
    LB_CHECK_ARG(buf || size == 0, -1);
    LB_CHECK_ARG(r, snprintf(buf, size, "BLAS: unknown"));
    char why[96];
    if (r->core_choice == LB_BLAS_CORE_CORRECTED)
        snprintf(why, sizeof why, "corrected from %s", r->core_detected);
    else if (r->core_choice == LB_BLAS_CORE_USER)
        snprintf(why, sizeof why, "set by OPENBLAS_CORETYPE");
    else if (r->core_choice == LB_BLAS_CORE_ISA)
        snprintf(why, sizeof why, "LOOKBACK_ISA, instead of %s", r->core_detected);
    else
        snprintf(why, sizeof why, "detected");
    char lib[64];
    /* "OpenBLAS 0.3.21" from the configuration string: its first two words */
    size_t first = strcspn(r->library, " ");
    size_t second = r->library[first] ? first + 1 + strcspn(r->library + first + 1, " ") : first;
    snprintf(lib, sizeof lib, "%.*s", (int)(second < 63 ? second : 63), r->library);
    return snprintf(buf, size, "%s (%s), core %s (%s; CPU %s), %d BLAS thread%s, %d thread%s, fused attention %s",
                    lib, r->threading, r->core, why, r->cpu_isa, r->blas_threads, r->blas_threads == 1 ? "" : "s",
                    r->threads, r->threads == 1 ? "" : "s", r->attention_isa ? r->attention_isa : "unknown");
}

int lb_address_space_free(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    munmap(p, bytes);
    return 1;
}

/* The number after `key` in a /proc-style file of "key value [kB]" lines, times `unit`;
 * -1 when absent. A file holding a bare number (cgroup files) passes key "". */
static int64_t read_number(const char *path, const char *key, int64_t unit)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    int64_t v = -1;
    size_t klen = strlen(key);
    while (v < 0 && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0)
            continue;
        char *end;
        long long x = strtoll(line + klen, &end, 10);
        if (end != line + klen && x >= 0)
            v = x > INT64_MAX / unit ? INT64_MAX : (int64_t)x * unit;
    }
    fclose(f);
    return v;
}

static void take_smaller(int64_t v, const char *what, int64_t *best, char *why, size_t why_size)
{
    if (v < 0 || (*best >= 0 && v >= *best))
        return;
    *best = v;
    if (why && why_size)
        snprintf(why, why_size, "%s", what);
}

int64_t lb_memory_free_bytes(char *why, size_t why_size)
{
    int64_t best = -1;
    if (why && why_size)
        why[0] = '\0';
    int64_t avail = read_number("/proc/meminfo", "MemAvailable:", 1024);
    int64_t swap = read_number("/proc/meminfo", "SwapFree:", 1024);
    if (avail >= 0)
        take_smaller(avail + (swap > 0 ? swap : 0), "free memory (MemAvailable + SwapFree)", &best, why, why_size);
    /* cgroup v2, then v1 ("max" and v1's huge "unlimited" read as no limit) */
    int64_t limit = read_number("/sys/fs/cgroup/memory.max", "", 1);
    int64_t used = read_number("/sys/fs/cgroup/memory.current", "", 1);
    if (limit < 0) {
        limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", "", 1);
        used = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", "", 1);
    }
    if (limit >= 0 && used >= 0 && limit < ((int64_t)1 << 60))
        take_smaller(limit > used ? limit - used : 0, "the control group's memory limit", &best, why, why_size);
    struct rlimit lim;
    if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
        int64_t mapped = read_number("/proc/self/status", "VmSize:", 1024);
        int64_t cap = lim.rlim_cur > (rlim_t)INT64_MAX ? INT64_MAX : (int64_t)lim.rlim_cur;
        if (mapped >= 0)
            take_smaller(cap > mapped ? cap - mapped : 0, "the address space left under ulimit -v", &best, why,
                         why_size);
    }
    return best;
}

enum { BLAS_HEADROOM_BYTES = 32 << 20 };

int lb_blas_reserve_buffers(int n)
{
    static int reserved = 0; /* buffers already in place (an earlier call) */
    if (n < 1)
        n = 1;
    while (n > reserved && !lb_address_space_free((size_t)n * LB_BLAS_BUFFER_BYTES + BLAS_HEADROOM_BYTES)) {
        if (n == 1) {
            struct rlimit lim;
            char limit[64] = "";
            if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
                snprintf(limit, sizeof limit, " (the address-space limit, ulimit -v, is %llu MB)",
                         (unsigned long long)(lim.rlim_cur >> 20));
            lb_error(LB_ERR_MEMORY,
                     "out of memory (while reserving the %d MB buffer of the linear-algebra library, OpenBLAS)%s",
                     LB_BLAS_BUFFER_BYTES >> 20, limit);
            return -1;
        }
        n--;
    }
    lb_set_num_threads(n);
    if (n > reserved) {
        /* One product large enough to run on every thread: each allocates its buffer now. */
        enum { D = 256 };
        static float a[D * D], c[D * D];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, D, D, D, 1.0f, a, D, a, D, 0.0f, c, D);
        reserved = n;
    }
    return n;
}
