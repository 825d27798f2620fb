/* pp_check.c - the 1F1B pipeline schedule (train/pipeline.h) over real MPI ranks.
 *
 *   mpirun -np P grit-pp-check FAMILY MICRO [--recompute] [--hang STAGE]
 *
 * Every rank is one stage of a 4-layer model of FAMILY (neox, llama: GQA, falcon:
 * untied); the pipeline group comes from the process grid (comm/grid.h, TP 1 x PP P x
 * DP 1). Each rank also runs the whole model on one rank, MICRO micro-batches of
 * gradient accumulation, as the reference. Two steps with an AdamW-free update in
 * between (w -= 1e-3 g, so the second step runs on moved weights). Checked on every
 * stage: the loss sum (the last stage's, broadcast) and every weight and gradient of the
 * stage's tensors are bitwise the reference's, by name. Prints the bubble (measured
 * time blocked in exchanges over the step) beside the ideal (P-1)/(M+P-1).
 *
 * --hang STAGE: that stage stops answering after its first step's first exchange
 * (sleeps); every other stage must fail with an error naming a pipeline exchange within
 * GRIT_DIST_TIMEOUT (exit 3), not hang. Exit 0 all equal, 1 a difference, 2 usage. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/grid.h"
#include "core/progress.h"
#include "model/family.h"
#include "train/pipeline.h"
#include "../unit/model/stage_cmp.h"

enum { B = 2, T = 32 };

static int hang_stage = -1;

static void sgd(gx_model *m)
{
    for (size_t i = 0; i < m->num_params; i++)
        m->params[i] -= 1e-3f * m->grads[i];
}

/* Before the stage's last backward of its first step (after its warm-up exchanges): a
 * hung stage, alive and silent. */
static void hang_hook(void *ctx)
{
    (void)ctx;
    for (;;)
        sleep(1000);
}

int main(int argc, char **argv)
{
    comm world;
    if (comm_init(&world, &argc, &argv) != GRIT_OK) {
        fprintf(stderr, "pp_check: %s\n", grit_errmsg());
        return 2;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: mpirun -np P grit-pp-check neox|llama|falcon MICRO "
                        "[--recompute] [--hang STAGE]\n");
        return 2;
    }
    bool rc = false;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--recompute"))
            rc = true;
        else if (!strcmp(argv[i], "--hang") && i + 1 < argc)
            hang_stage = atoi(argv[++i]);
    }
    int M = atoi(argv[2]), P = world.size;
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    gx_config c;
    const char *fam = argv[1];
    if (gx_preset(!strcmp(fam, "neox") ? "pythia-14m" : !strcmp(fam, "llama") ? "llama-tiny"
                                                                               : "falcon-tiny-new",
                  &c) != GRIT_OK)
        return 2;
    c.layers = 4;
    c.vocab = 512;
    c.tied = false;
    comm_grid g;
    if (comm_grid_init(&g, &world, 1, P, 1) != GRIT_OK) {
        fprintf(stderr, "pp_check: %s\n", grit_errmsg());
        return 2;
    }
    int s = g.pp_rank;
    gx_model whole, st;
    pp_sched ps;
    if (gx_init(&whole, &c, B, T, 1) != GRIT_OK ||
        gx_init_stage(&st, &c, B, T, 1, 1, 0, rc, P, s) != GRIT_OK ||
        pp_init(&ps, &g.ppc, &st, M) != GRIT_OK) {
        fprintf(stderr, "pp_check stage %d: %s\n", s, grit_errmsg());
        return 2;
    }
    gx_init_weights(&whole, 3);
    gx_init_weights(&st, 3);
    if (s == hang_stage)
        ps.before_last_bwd = hang_hook;
    int32_t **tok = malloc(sizeof *tok * (size_t)M);
    int bad = 0;
    for (int step = 0; step < 2; step++) {
        for (int i = 0; i < M; i++) {
            tok[i] = malloc(sizeof(int32_t) * B * (T + 1));
            for (int k = 0; k < B * (T + 1); k++)
                tok[i][k] = (int32_t)(((size_t)k * 7919 + 13 + 101 * (size_t)i + 977 * (size_t)step) %
                                      (size_t)c.vocab);
        }
        gx_zero_grad(&whole);
        gx_zero_grad(&st);
        double ref = 0, got = 0;
        for (int i = 0; i < M; i++)
            ref += gx_step(&whole, tok[i], 1.0f / (float)M, NULL);
        double t0 = now_seconds();
        grit_err e = pp_step(&ps, (const int32_t *const *)tok, NULL, 1.0f / (float)M, &got);
        if (e != GRIT_OK) {
            printf("stage %d: step %d failed after %.1f s: %s\n", s, step, now_seconds() - t0,
                   grit_errmsg());
            fflush(stdout);
            _exit(3); /* MPI cannot finalise with a peer hung */
        }
        if (got != ref) {
            fprintf(stderr, "stage %d step %d: loss sum %.9g, the single rank's %.9g\n", s, step,
                    got, ref);
            bad++;
        }
        char what[32];
        snprintf(what, sizeof what, "stage %d", s);
        bad += stage_tensors_differ(&st, &whole, 0, what) +
               stage_tensors_differ(&st, &whole, 1, what);
        printf("stage %d of %d, step %d: %d micro-batches, loss %.7f, %zu of %zu parameters, "
               "%.3f s, blocked %.3f s (%.0f%%; ideal bubble %.0f%%), sent %.2f MiB, %s\n",
               s, P, step, M, got / M, st.num_params, whole.num_params, ps.step_s, ps.wait_s,
               100 * ps.wait_s / ps.step_s, 100 * pp_bubble(P, M), ps.bytes / 1048576.0,
               bad ? "DIFFERENT" : "bitwise the single rank's");
        sgd(&whole);
        sgd(&st);
        for (int i = 0; i < M; i++)
            free(tok[i]);
    }
    free(tok);
    pp_free(&ps);
    gx_free(&st);
    gx_free(&whole);
    comm_grid_free(&g);
    comm_finalize(&world);
    return bad ? 1 : 0;
}
