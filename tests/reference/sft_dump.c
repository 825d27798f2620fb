/*
 * sft_dump.c - runs one supervised fine-tuning micro-batch through grit's
 * decoder (gx_step_ex: loss mask + packed examples) and dumps what the
 * PyTorch check (sft_ref.py) needs: the weights, the batch (tokens, mask,
 * segment starts), the logits, the masked loss and every gradient.
 *
 * usage: grit-sft-dump CONFIG.json OUTDIR [--no-seg]
 *
 * The batch is made here from the config's seed: row 0 and row 1 pack
 * examples of random lengths back to back (the last one cut at the row's
 * end), the last row holds one example followed by padding. Each example
 * is a prompt (mask 0) then a response (mask 1); the first token of every
 * example is never a target (it would be predicted from the previous
 * example). --no-seg runs the same batch without the segment starts, so
 * packed examples attend to each other: the checker must then fail (the
 * negative test of reference.sft_parity_cross_caught).
 */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/safetensors.h"
#include "core/fsutil.h"
#include "core/rng.h"
#include "train/config.h"
#include "train/train.h"

static int fail(const char *what)
{
    fprintf(stderr, "grit-sft-dump: %s: %s\n", what, grit_errmsg());
    return 1;
}

static uint32_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 33);
}

/* One row of T+1 tokens: examples packed from position 0; pad_after > 0 stops
 * after that many examples and pads the rest (one padding segment, mask 0). */
static void make_row(uint64_t *rs, int T, int V, int pad_after, int32_t *tok, uint8_t *mask,
                     int32_t *seg)
{
    int pos = 0, k = 0;
    while (pos < T + 1) {
        int len = 4 + (int)(next(rs) % 14), prompt = 1 + (int)(next(rs) % (unsigned)(len - 2));
        if (pad_after && k == pad_after)
            len = T + 1 - pos; /* the padding segment */
        for (int i = 0; i < len && pos + i < T + 1; i++) {
            int t = pos + i;
            tok[t] = (int32_t)(next(rs) % (unsigned)V);
            mask[t] = pad_after && k == pad_after ? 0 : i >= prompt;
            if (t < T)
                seg[t] = pos;
        }
        pos += len;
        k++;
    }
}

int main(int argc, char **argv)
{
    int noseg = argc == 4 && !strcmp(argv[3], "--no-seg");
    if (argc != 3 && !noseg) {
        fprintf(stderr, "usage: %s CONFIG.json OUTDIR [--no-seg]\n", argv[0]);
        return 2;
    }
    const char *out = argv[2];
    train_cfg cfg;
    train_cfg_defaults(&cfg);
    if (train_cfg_load(&cfg, argv[1]) != GRIT_OK)
        return fail("config");
    if (fs_mkdirs(out) != GRIT_OK)
        return fail("outdir");
    omp_set_num_threads(cfg.threads);
    openblas_set_num_threads(cfg.threads);
    int B = 3, T = cfg.optim.seq_len, V = cfg.model.vocab;
    char path[2048];
    char *text = train_cfg_dump(&cfg);
    snprintf(path, sizeof path, "%s/config.json", out);
    if (fs_write_durable(path, text, strlen(text)) != GRIT_OK)
        return fail("config.json");
    free(text);

    gx_model m;
    if (gx_init(&m, &cfg.model, B, T, cfg.threads) != GRIT_OK)
        return fail("model");
    gx_init_weights(&m, cfg.seed);
    snprintf(path, sizeof path, "%s/weights.safetensors", out);
    if (train_save_weights(&m, path) != GRIT_OK)
        return fail("weights");

    int32_t *tok = malloc(sizeof(int32_t) * (size_t)B * (T + 1));
    uint8_t *mask = malloc((size_t)B * (T + 1));
    int32_t *seg = malloc(sizeof(int32_t) * (size_t)B * T);
    float *logits = malloc(sizeof(float) * (size_t)B * T * V);
    uint64_t rs = cfg.seed * 2654435761ULL + 1;
    for (int b = 0; b < B; b++)
        make_row(&rs, T, V, b == B - 1 ? 1 : 0, tok + (size_t)b * (T + 1),
                 mask + (size_t)b * (T + 1), seg + (size_t)b * T);

    gx_zero_grad(&m);
    gx_batch sb = {.mask = mask, .seg = noseg ? NULL : seg};
    float loss = gx_step_ex(&m, tok, &sb, 1.0f, logits);

    int nt = m.num_tensors;
    st_entry *e = calloc((size_t)nt + 5, sizeof *e);
    char (*names)[128] = calloc((size_t)nt, sizeof *names);
    e[0] = (st_entry){.name = "tokens", .dtype = "I32", .ndim = 2, .shape = {B, T + 1},
                      .data = tok};
    e[1] = (st_entry){.name = "mask", .dtype = "U8", .ndim = 2, .shape = {B, T + 1},
                      .data = mask};
    e[2] = (st_entry){.name = "seg", .dtype = "I32", .ndim = 2, .shape = {B, T}, .data = seg};
    e[3] = (st_entry){.name = "logits", .dtype = "F32", .ndim = 3, .shape = {B, T, V},
                      .data = logits};
    e[4] = (st_entry){.name = "loss", .dtype = "F32", .ndim = 1, .shape = {1}, .data = &loss};
    for (int i = 0; i < nt; i++) {
        const gx_tensor *t = &m.tensors[i];
        snprintf(names[i], sizeof names[i], "grad.%s", t->name);
        e[i + 5] = (st_entry){.name = names[i], .dtype = "F32", .ndim = t->ndim,
                              .shape = {t->shape[0], t->shape[1]},
                              .data = m.grads + t->offset};
    }
    snprintf(path, sizeof path, "%s/sft.safetensors", out);
    if (st_write(path, e, nt + 5) != GRIT_OK)
        return fail("sft.safetensors");
    printf("grit-sft-dump: %d rows x %d tokens, masked loss %.6f -> %s\n", B, T, loss, out);
    free(e);
    free(names);
    free(tok);
    free(mask);
    free(seg);
    free(logits);
    gx_free(&m);
    return 0;
}
