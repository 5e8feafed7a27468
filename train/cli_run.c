/* One training run into a run folder, shared by train, compare and demo. */
#include <math.h>
#include <string.h>

#include "train/cli.h"
#include "train/cli_options.h"

typedef struct progress_state {
    lb_progress bar;
    int quiet;
    lb_eval_result last_val;
} progress_state;

static void on_event(lb_loop_event event, const lb_step_stats *s, const lb_eval_result *r, void *user)
{
    progress_state *p = user;
    if (event == LB_EVENT_EVAL)
        p->last_val = *r;
    if (p->quiet)
        return;
    if (event == LB_EVENT_STEP) {
        if (isnan(s->accuracy))
            lb_progress_update(&p->bar, s->step, "loss %.4f lr %.2e%s", s->loss, s->lr, s->skipped ? " (skipped)" : "");
        else
            lb_progress_update(&p->bar, s->step, "loss %.4f acc %.3f lr %.2e%s", s->loss, s->accuracy, s->lr,
                               s->skipped ? " (skipped: non-finite gradient)" : "");
    } else if (event == LB_EVENT_EVAL) {
        if (p->bar.tty)
            fputc('\n', stderr);
        if (isnan(r->accuracy))
            fprintf(stderr, "%s step %lld: val mse %.5f\n", p->bar.label, (long long)s->step, r->mse);
        else
            fprintf(stderr, "%s step %lld: val loss %.4f accuracy %.4f\n", p->bar.label, (long long)s->step, r->loss,
                    r->accuracy);
    }
}

lb_status lb_cli_run_training(lb_run_config *rc, const char *dir, int resume, int quiet, lb_cli_run *out,
                              lb_model **model_out)
{
    char config_path[4200], ckpt_path[4200], metrics_path[4200];
    lb_cli_path(config_path, sizeof config_path, dir, "config.json");
    lb_cli_path(ckpt_path, sizeof ckpt_path, dir, "checkpoint.h5");
    lb_cli_path(metrics_path, sizeof metrics_path, dir, "metrics.csv");
    memset(out, 0, sizeof *out);
    if (model_out)
        *model_out = NULL;
    lb_dataset *data = lb_dataset_open(rc->data);
    if (!data)
        return lb_last_status();
    lb_run_config_fit_data(rc, data);
    int threads = lb_cli_set_threads(rc->train.threads);
    lb_model *model = lb_model_new(&rc->model);
    lb_trainer *trainer = model ? lb_trainer_new(model, data, &rc->train) : NULL;
    FILE *metrics = NULL;
    lb_status st = trainer ? LB_OK : lb_last_status();
    if (st == LB_OK && resume)
        st = lb_trainer_load(trainer, ckpt_path);
    if (st == LB_OK && (st = lb_cli_mkdir(dir)) == LB_OK)
        st = lb_run_config_save_json(rc, config_path);
    if (st == LB_OK) {
        int new_metrics = !lb_cli_exists(metrics_path);
        if (!(metrics = fopen(metrics_path, "a")))
            st = lb_error(LB_ERR_IO, "%s: cannot open for writing", metrics_path);
        else if (new_metrics)
            fprintf(metrics, "%s\n", lb_metrics_header());
    }
    if (st == LB_OK) {
        out->parameters = lb_params_numel(lb_model_params(model));
        if (!quiet)
            fprintf(stderr, "training %s (%lld parameters) on %s: steps %lld..%lld%s, %d thread%s\n",
                    lb_model_kind_name(rc->model.kind), (long long)out->parameters, rc->data,
                    (long long)lb_trainer_steps_done(trainer), (long long)rc->train.steps,
                    rc->train.time_budget > 0 ? " or the time budget" : "", threads, threads == 1 ? "" : "s");
        progress_state ps = {.quiet = quiet};
        const char *slash = strrchr(dir, '/');
        lb_progress_begin(&ps.bar, slash && slash[1] ? slash + 1 : dir, rc->train.steps);
        ps.bar.budget = rc->train.time_budget;
        st = lb_trainer_run(trainer, ckpt_path, metrics, on_event, &ps);
        if (!quiet)
            lb_progress_end(&ps.bar);
        out->steps = lb_trainer_steps_done(trainer);
        out->seconds = lb_trainer_elapsed(trainer);
        out->last_val = ps.last_val;
        if (st == LB_ERR_NUMERIC)
            lb_error_context("the last good checkpoint is kept in %s", ckpt_path);
        else if (st == LB_OK && !quiet)
            fprintf(stderr, "done: %lld steps in %.1f s; checkpoint %s\n", (long long)out->steps, out->seconds,
                    ckpt_path);
    }
    if (metrics)
        fclose(metrics);
    lb_trainer_free(trainer);
    if (st == LB_OK && model_out)
        *model_out = model;
    else
        lb_model_free(model);
    lb_dataset_close(data);
    return st;
}
