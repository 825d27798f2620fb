/* train.c - the training loop (see train.h). */
#include "train/train.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ckpt/safetensors.h"
#include "core/fsutil.h"
#include "core/progress.h"
#include "data/synthetic.h"
#include "train/optim.h"

double train_peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

grit_err train_save_weights(const gx_model *m, const char *path)
{
    st_entry *e = calloc((size_t)m->num_tensors, sizeof *e);
    if (!e)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    for (int i = 0; i < m->num_tensors; i++) {
        const gx_tensor *t = &m->tensors[i];
        e[i] = (st_entry){.name = t->name, .dtype = "F32", .ndim = t->ndim,
                          .data = m->params + t->offset};
        e[i].shape[0] = t->shape[0];
        e[i].shape[1] = t->shape[1];
    }
    grit_err rc = st_write(path, e, m->num_tensors);
    free(e);
    return rc;
}

static void path_join(char *buf, size_t cap, const char *dir, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

static void summary(FILE *log, const train_cfg *cfg, const gx_model *m, long steps,
                    double first_loss, double last_loss, double min_loss, double secs,
                    double tokens)
{
    char dur[32];
    format_duration(dur, sizeof dur, secs);
    double fpt = gx_flops_per_token(&cfg->model, cfg->optim.seq_len);
    fprintf(log, "\n  %-26s %s\n", "run", cfg->run_dir);
    fprintf(log, "  %-26s %s, %.2fM parameters\n", "model",
            cfg->preset[0] ? cfg->preset : "custom", (double)m->num_params / 1e6);
    fprintf(log, "  %-26s %ld\n", "steps", steps);
    fprintf(log, "  %-26s %.0f\n", "tokens", tokens);
    fprintf(log, "  %-26s %.4f -> %.4f (min %.4f)\n", "loss", first_loss, last_loss, min_loss);
    fprintf(log, "  %-26s %s\n", "wall time", dur);
    fprintf(log, "  %-26s %.0f tok/s, %.1f GFLOP/s\n", "throughput", tokens / secs,
            tokens / secs * fpt / 1e9);
    fprintf(log, "  %-26s %.0f MiB\n", "peak memory (RSS)", train_peak_rss_mib());
    fprintf(log, "  %-26s %d\n", "threads", cfg->threads);
    fprintf(log, "  %-26s %s/metrics.jsonl, %s/model.safetensors\n\n", "outputs",
            cfg->run_dir, cfg->run_dir);
}

grit_err train_run(const train_cfg *cfg, FILE *log, train_result *res)
{
    const optim_cfg *o = &cfg->optim;
    int B = o->micro_batch, T = o->seq_len, A = o->grad_accum;
    char path[1200];
    gx_model m;
    FILE *mf = NULL;
    int32_t *tokens = NULL;
    char *cfgtext = NULL;
    grit_err rc;

    omp_set_num_threads(cfg->threads);
    openblas_set_num_threads(cfg->threads);
    memset(&m, 0, sizeof m);

    if ((rc = fs_mkdirs(cfg->run_dir)) != GRIT_OK)
        return rc;
    cfgtext = train_cfg_dump(cfg);
    if (!cfgtext)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    path_join(path, sizeof path, cfg->run_dir, "config.json");
    rc = fs_write_durable(path, cfgtext, strlen(cfgtext));
    free(cfgtext);
    if (rc != GRIT_OK)
        return rc;
    if ((rc = gx_init(&m, &cfg->model, B, T, cfg->threads)) != GRIT_OK)
        return rc;
    gx_init_weights(&m, cfg->seed);
    tokens = malloc(sizeof(int32_t) * (size_t)A * B * (T + 1));
    path_join(path, sizeof path, cfg->run_dir, "metrics.jsonl");
    mf = fopen(path, "w");
    if (!tokens || !mf) {
        rc = !tokens ? grit_errf(GRIT_ENOMEM, "out of memory")
                     : grit_errf(GRIT_EIO, "%s: cannot create", path);
        goto out;
    }
    if (log)
        fprintf(log, "grit train: %s, %.2fM params, %d layers, micro batch %d x %d tokens, "
                     "accum %d, %d steps, %d threads, activations %.1f KiB/token\n",
                cfg->preset[0] ? cfg->preset : "custom model", (double)m.num_params / 1e6,
                cfg->model.layers, B, T, A, o->total_steps, cfg->threads,
                (double)gx_act_bytes_per_token(&cfg->model) / 1024.0);

    progress pr;
    progress_init(&pr, log ? log : stderr, o->total_steps, cfg->log_every);
    double t_start = now_seconds(), first = 0, last = 0, minl = INFINITY, tokens_done = 0;
    long step;
    for (step = 0; step < o->total_steps; step++) {
        double t0 = now_seconds();
        long sample0 = step * (long)A * B;
        syn_fill(cfg->seed, cfg->synthetic_vocab, sample0, A * B, T + 1, tokens);
        gx_zero_grad(&m);
        double loss = 0.0;
        for (int a = 0; a < A; a++)
            loss += gx_step(&m, tokens + (size_t)a * B * (T + 1), 1.0f / (float)A, NULL);
        loss /= A;
        double norm = optim_grad_norm(&m);
        if (!isfinite(loss) || !isfinite(norm)) {
            rc = grit_errf(GRIT_ENUMERIC, "step %ld: non-finite %s (loss %g, grad norm %g)",
                           step + 1, isfinite(loss) ? "gradient norm" : "loss", loss, norm);
            goto out;
        }
        double lr = optim_lr(o, step);
        optim_adamw(&m, o, step + 1, lr, optim_clip_coef(o, norm));
        double dt = now_seconds() - t0, ntok = (double)A * B * T;
        tokens_done += ntok;
        fprintf(mf,
                "{\"step\":%ld,\"loss\":%.9g,\"grad_norm\":%.9g,\"lr\":%.9g,"
                "\"tokens\":%.0f,\"tokens_per_s\":%.1f,\"step_time_s\":%.6f}\n",
                step + 1, loss, norm, lr, tokens_done, ntok / dt, dt);
        fflush(mf);
        if (step == 0)
            first = loss;
        last = loss;
        minl = loss < minl ? loss : minl;
        if (log) {
            char text[160];
            snprintf(text, sizeof text, "loss %.4f | gnorm %.3f | lr %.2e | %.0f tok/s", loss,
                     norm, lr, ntok / dt);
            progress_update(&pr, step + 1, text);
        }
    }
    if (log)
        progress_finish(&pr);
    double secs = now_seconds() - t_start;
    path_join(path, sizeof path, cfg->run_dir, "model.safetensors");
    if ((rc = train_save_weights(&m, path)) != GRIT_OK)
        goto out;
    if (log)
        summary(log, cfg, &m, step, first, last, minl, secs, tokens_done);
    if (res)
        *res = (train_result){step, last, secs, tokens_done / secs};
out:
    if (mf && fclose(mf) != 0 && rc == GRIT_OK)
        rc = grit_errf(GRIT_EIO, "%s/metrics.jsonl: write failed", cfg->run_dir);
    free(tokens);
    gx_free(&m);
    return rc;
}
