/* lookback study: the command of the method study of lab/study.h: reads its options,
 * runs its jobs (lb_study_run: child processes, MPI ranks, a stop on SIGINT/SIGTERM) and
 * writes the report. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "lab/study.h"
#include "train/distributed.h"

static void study_usage(FILE *out)
{
    fputs("usage: lookback study [--quick] [--seeds N] [--tasks LIST] [--methods LIST] [--jobs N] [--threads N]\n"
          "                      --out DIR\n"
          "\n"
          "The source's table of alternatives, measured: full attention (transformer), local attention,\n"
          "the LSTM and a dilated causal convolution (plus three length-robust attention variants on\n"
          "spike16) are trained on tasks chosen to test each method's best fit, each with its recipe\n"
          "(one table in lab/recipes.c, from the papers and measured runs; docs/study.md). Every cell\n"
          "trains until it is solved on the validation split (99 % accuracy; modsum 100 %; copy: a\n"
          "loss at most 5 % of the memoryless loss) or its task's budget runs out (CPU seconds per\n"
          "thread: the same work however busy the machine is), records when it learnt, then is\n"
          "evaluated at the training length and at longer test lengths. Writes DIR/study.json,\n"
          "DIR/study.md and PNG plots. Every finished job is stored: the same command run again\n"
          "continues a killed study.\n"
          "\n"
          "  --out DIR           the study folder (required)\n"
          "  --quick             1 seed, shorter budgets, the recipes' default learning rates, copy at\n"
          "                      T = 200: at most about 15 minutes on 2 idle cores\n"
          "  --seeds N           seeds per (task, method) (default 3; --quick 1)\n"
          "  --tasks LIST        spike16,recall,local,parity,copy,modsum (default all)\n"
          "  --methods LIST      transformer,local,lstm,conv,ssmax,mixed,logn,linear,mamba (default\n"
          "                      all; ssmax, mixed and logn apply to spike16 only)\n"
          "  --budget SECONDS    CPU seconds per cell for every task (default: each task's own budget,\n"
          "                      sized from the measured time to learn of its fastest learner)\n"
          "  --steps N           optimizer steps per cell at most (learning-rate probes: a quarter),\n"
          "                      the same work on any machine; without --budget, no CPU budget\n"
          "  --eval-examples N   test sequences per test length (default 200; --quick 100)\n"
          "  --recall-scale S    default (T 128, 8 pairs) or zoology (vocabulary 8,192, T 512, 64 pairs)\n"
          "  --jobs N            jobs run at once, each in its own process (default: processors /\n"
          "                      --threads)\n"
          "  --threads N         threads per job (default: processors / --jobs; 1 when neither is given)\n"
          "  --quiet             no progress lines\n"
          "Under mpirun -np N the jobs of each phase are spread over the N processes (job i on\n"
          "process i mod N; the study folder must be shared by the hosts); process 0 writes the report.\n",
          out);
}

/* Reads the options into o, *jobs and *quiet; -1 to go on, else the exit code (printed). */
static int parse_args(int argc, char **argv, lb_study_options *o, int *jobs, int *quiet)
{
    const char *cmd = "study";
    int c;
    int64_t iv;
    static const struct option opts[] = {
        {"jobs", required_argument, NULL, 'j'},
        {"out", required_argument, NULL, 'o'},           {"quick", no_argument, NULL, 'Q'},
        {"seeds", required_argument, NULL, 's'},         {"tasks", required_argument, NULL, 'T'},
        {"methods", required_argument, NULL, 'm'},       {"threads", required_argument, NULL, 't'},
        {"budget", required_argument, NULL, 'b'},        {"eval-examples", required_argument, NULL, 'e'},
        {"steps", required_argument, NULL, 'S'},
        {"recall-scale", required_argument, NULL, 'r'},  {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        lb_status st = LB_OK;
        switch (c) {
        case 'o': o->out = optarg; break;
        case 'Q': o->quick = 1; break;
        case 'j':
            if ((st = lb_option_int("--jobs", optarg, 1, 64, &iv)) == LB_OK)
                *jobs = (int)iv;
            break;
        case 's':
            if ((st = lb_option_int("--seeds", optarg, 1, LB_STUDY_MAX_SEEDS, &iv)) == LB_OK)
                o->seeds = (int)iv;
            break;
        case 'T': o->tasks = optarg; break;
        case 'm': o->methods = optarg; break;
        case 't':
            if ((st = lb_option_int("--threads", optarg, 0, 1024, &iv)) == LB_OK)
                o->threads = (int)iv;
            break;
        case 'b': st = lb_option_real("--budget", optarg, 0.1, 1e6, &o->budget); break;
        case 'e': st = lb_option_int("--eval-examples", optarg, 1, 1 << 20, &o->eval_examples); break;
        case 'S': st = lb_option_int("--steps", optarg, 1, (int64_t)1 << 40, &o->steps); break;
        case 'r':
            if (strcmp(optarg, "zoology") == 0)
                o->zoology = 1;
            else if (strcmp(optarg, "default") != 0)
                st = lb_error(LB_ERR_VALUE, "--recall-scale: '%s' is not default or zoology", optarg);
            break;
        case 'q': *quiet = 1; break;
        case 'h': study_usage(stdout); return 0;
        default: return lb_cli_bad_option(cmd, c, argv);
        }
        if (st != LB_OK)
            return lb_cli_error(cmd, 2, "%s", lb_last_error());
    }
    if (optind < argc)
        return lb_cli_error(cmd, 2, "unexpected argument '%s'", argv[optind]);
    if (!o->out)
        return lb_cli_error(cmd, 2, "--out DIR is required (see lookback study --help)");
    return -1;
}

/* The study of the folder on every rank, or NULL with *code the exit code (printed by
 * rank 0; under mpirun the others wait for it, then leave with the same code). */
static lb_study *open_study(const lb_study_options *o, int *code)
{
    const char *cmd = "study";
    /* Under mpirun rank 0 makes the folder and its options file before the others read them. */
    lb_study *s = lb_dist_rank() == 0 ? lb_study_new(o) : NULL;
    int64_t refused = 0; /* rank 0's exit code when it refuses; every rank leaves with it */
    if (lb_dist_rank() == 0 && !s)
        refused = lb_cli_error(cmd, lb_last_status() == LB_ERR_VALUE ? 2 : 1, "%s", lb_last_error());
    /* One study command per folder: two would run the same jobs into the same run folders. */
    if (s && lb_run_lock_dir(o->out) < 0) {
        lb_study_free(s);
        s = NULL;
        refused = lb_cli_error(cmd, 1, "%s", lb_last_error());
    }
    if (lb_dist_sum(&refused, 1) != LB_OK) {
        lb_study_free(s);
        *code = lb_cli_fail(cmd);
        return NULL;
    }
    *code = (int)refused;
    if (refused) /* rank 0 said why */
        return NULL;
    if (lb_dist_rank() != 0 && !(s = lb_study_new(o)))
        *code = lb_cli_error(cmd, 1, "%s", lb_last_error());
    return s;
}

/* After the jobs: the report (rank 0) and the exit code. */
static int finish(lb_study *s, const lb_study_options *o, const lb_jobs_result *r, int quiet)
{
    const char *cmd = "study";
    if (lb_dist_rank() != 0) /* rank 0 reports for all */
        return r->signal ? 128 + r->signal : r->failed ? 1 : 0;
    if (r->signal) {
        fprintf(stderr, "lookback study: interrupted; %d of %d cells are stored in %s: run the same command again to "
                        "continue\n",
                r->counted_done, r->counted, o->out);
        lb_study_report(s, -1);
        return 128 + r->signal; /* as a shell reports the signal: 130 Ctrl-C, 143 SIGTERM */
    }
    if (lb_study_report(s, r->ran ? r->seconds : -1) != LB_OK)
        return lb_cli_fail(cmd);
    if (!quiet) {
        char took[32];
        lb_format_duration(r->seconds, took, sizeof took);
        fprintf(stderr, "study done in %s: %d of %d cells; %s/study.md, study.json and the plots written\n", took,
                r->counted_done, r->counted, o->out);
    }
    if (r->failed)
        return lb_cli_error(cmd, 1, "%d job%s failed (see above); run the same command again to retry", r->failed,
                            r->failed == 1 ? "" : "s");
    return 0;
}

int lb_cli_study(int argc, char **argv)
{
    lb_study_options o;
    memset(&o, 0, sizeof o);
    int quiet = 0, jobs = 0, code = parse_args(argc, argv, &o, &jobs, &quiet);
    if (code >= 0)
        return code;
    lb_study_share_processors(&o, jobs);
    /* The command as run, for the report's header (arguments with spaces or quotes quoted). */
    char command[1024] = "lookback";
    for (int i = 0; i < argc; i++) {
        size_t used = strlen(command);
        int plain = argv[i][0] && strpbrk(argv[i], " \t'\"$\\") == NULL;
        snprintf(command + used, sizeof command - used, plain ? " %s" : " '%s'", argv[i]);
    }
    o.command = command;
    lb_study *s = open_study(&o, &code);
    if (!s)
        return code;
    lb_jobs_result r;
    code = lb_study_run(s, quiet, &r) != LB_OK ? lb_cli_fail("study") : finish(s, &o, &r, quiet);
    lb_study_free(s);
    return code;
}
