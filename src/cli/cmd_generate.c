/* cmd_generate.c - `grit generate`: prompt -> text from a checkpoint. */
#include <cblas.h>
#include <errno.h>
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/pretrained.h"
#include "cli/cli.h"
#include "core/progress.h"
#include "core/rng.h"
#include "data/bpe.h"
#include "data/sft.h"
#include "model/gptneox_infer.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit generate --checkpoint DIR (--tokenizer FILE | --vocab FILE --merges FILE)\n"
            "                     [options] [PROMPT]\n"
            "\n"
            "Continues PROMPT with the model in DIR and streams the text to stdout as it is\n"
            "made. DIR is a checkpoint step folder (config.json with model.safetensors or\n"
            "model-parallel shards, e.g. runs/x/ckpt/step_00001000), a Hugging Face\n"
            "GPT-NeoX, Llama or Falcon folder\n"
            "or a run directory (its newest checkpoint that verifies). A KV cache (one entry\n"
            "per kv head: GQA and multi-query caches are smaller) makes each new token cost\n"
            "one position. The prompt gets the BOS the tokenizer.json's post-processor adds\n"
            "(Llama); generation stops at <|endoftext|>, </s>, <|end_of_text|>, <|eot_id|>\n"
            "or <|im_end|> when the vocabulary has them.\n"
            "\n"
            "options:\n"
            "  --prompt TEXT       the prompt (or give it as the last argument; default:\n"
            "                      start from the end-of-document token)\n"
            "  --max-tokens N      tokens to generate (default 64; fewer at the context end)\n"
            "  --temperature T     0 = greedy (default); > 0 samples\n"
            "  --top-k K           sample among the K most likely tokens (default 0 = all)\n"
            "  --top-p P           nucleus sampling: the most likely tokens up to mass P\n"
            "                      (default 1 = all)\n"
            "  --seed N            sampling seed (default 0): the same seed, the same text\n"
            "  --ignore-eod        go on past the end tokens\n"
            "  --chat TEMPLATE     the prompt is a user message: render it with TEMPLATE\n"
            "                      (auto = tokenizer_config.json's chat_template beside\n"
            "                      --tokenizer; llama2, llama3, chatml, zephyr, plain; as for\n"
            "                      grit tokenize --sft, docs/sft.md) and the assistant's header\n"
            "  --messages FILE     with --chat: the conversation instead of PROMPT, a JSON list\n"
            "                      of {\"role\": system|user|assistant, \"content\": TEXT} (as\n"
            "                      grit serve's /v1/chat/completions renders its messages)\n"
            "  --threads N         compute threads (default: CPUs online)\n"
            "  --quiet             no statistics on stderr\n"
            "  -h, --help          show this help\n");
}

/* --messages FILE rendered with template t (auto resolved beside the tokenizer). */
static grit_err render_messages(const bpe *tok, const char *tokpath, sft_template t,
                                const char *path, bpe_ids *ids)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return grit_errf(GRIT_EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    size_t n = json_is_array(root) ? json_array_size(root) : 0;
    sft_msg *ms = n ? calloc(n, sizeof *ms) : NULL;
    grit_err rc = GRIT_OK;
    if (!ms)
        rc = grit_errf(GRIT_EINVAL, "%s: expected a non-empty JSON list of {\"role\", "
                                    "\"content\"} objects", path);
    for (size_t i = 0; rc == GRIT_OK && i < n; i++) {
        json_t *m = json_array_get(root, i);
        ms[i].role = json_string_value(json_object_get(m, "role"));
        ms[i].content = json_string_value(json_object_get(m, "content"));
        if (!ms[i].role || (strcmp(ms[i].role, "system") && strcmp(ms[i].role, "user") &&
                            strcmp(ms[i].role, "assistant")))
            rc = grit_errf(GRIT_EINVAL, "%s: [%zu].role: expected \"system\", \"user\" or "
                                        "\"assistant\"", path, i);
        else if (!ms[i].content)
            rc = grit_errf(GRIT_EINVAL, "%s: [%zu].content: expected a string", path, i);
    }
    if (rc == GRIT_OK && (rc = sft_template_resolve(tokpath, t, &t)) == GRIT_OK)
        rc = sft_render_chat(tok, t, ms, (int)n, ids);
    free(ms);
    json_decref(root);
    return rc;
}

static void emit(const bpe *t, int32_t id)
{
    size_t len;
    const char *s = bpe_token_bytes(t, (uint32_t)id, &len);
    if (s)
        fwrite(s, 1, len, stdout);
    fflush(stdout);
}

int cmd_generate(int argc, char **argv)
{
    const char *ckdir = NULL, *hf = NULL, *vocab = NULL, *merges = NULL, *prompt = NULL;
    double max_tokens = 64, temp = 0, top_k = 0, top_p = 1, seed = 0;
    double threads = (double)sysconf(_SC_NPROCESSORS_ONLN);
    int quiet = 0, ignore_eod = 0;
    const char *chat = NULL, *messages = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int v = i + 1 < argc;
        int bad = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--ignore-eod")) {
            ignore_eod = 1;
        } else if (!strcmp(a, "--chat") && v) {
            chat = argv[++i];
        } else if (!strcmp(a, "--messages") && v) {
            messages = argv[++i];
        } else if (!strcmp(a, "--checkpoint") && v) {
            ckdir = argv[++i];
        } else if (!strcmp(a, "--tokenizer") && v) {
            hf = argv[++i];
        } else if (!strcmp(a, "--vocab") && v) {
            vocab = argv[++i];
        } else if (!strcmp(a, "--merges") && v) {
            merges = argv[++i];
        } else if (!strcmp(a, "--prompt") && v) {
            prompt = argv[++i];
        } else if (!strcmp(a, "--max-tokens") && v) {
            bad = cli_num("generate", a, argv[++i], 0, 1 << 20, &max_tokens);
        } else if (!strcmp(a, "--temperature") && v) {
            bad = cli_num("generate", a, argv[++i], 0, 100, &temp);
        } else if (!strcmp(a, "--top-k") && v) {
            bad = cli_num("generate", a, argv[++i], 0, 1 << 24, &top_k);
        } else if (!strcmp(a, "--top-p") && v) {
            bad = cli_num("generate", a, argv[++i], 1e-9, 1, &top_p);
        } else if (!strcmp(a, "--seed") && v) {
            bad = cli_num("generate", a, argv[++i], 0, 9007199254740991.0, &seed);
        } else if (!strcmp(a, "--threads") && v) {
            bad = cli_num("generate", a, argv[++i], 1, 1024, &threads);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "grit generate: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!prompt) {
            prompt = a;
        } else {
            fprintf(stderr, "grit generate: unexpected argument '%s'\n", a);
            return 2;
        }
        if (bad)
            return 2;
    }
    if (messages && (!chat || prompt)) {
        fprintf(stderr, "grit generate: --messages FILE needs --chat TEMPLATE and no PROMPT\n");
        return 2;
    }
    if (!ckdir || (!hf == !vocab) || (!vocab != !merges)) {
        fprintf(stderr, "grit generate: %s\n",
                !ckdir ? "missing --checkpoint DIR"
                       : "give either --tokenizer FILE or --vocab FILE --merges FILE");
        usage(stderr);
        return 2;
    }
    int nt = (int)threads, code = 1;
    omp_set_num_threads(nt);
    openblas_set_num_threads(nt);
    bpe *tok = NULL;
    bpe_ctx *ctx = NULL;
    bpe_ids ids = {0};
    gx_model m;
    gxi_state s;
    float *logits = NULL;
    char where[4400];
    memset(&m, 0, sizeof m);
    memset(&s, 0, sizeof s);
    grit_err rc = hf ? bpe_open_hf(&tok, hf) : bpe_open_gpt2(&tok, vocab, merges);
    /* end tokens: the families' end-of-text and end-of-turn tokens the vocabulary has;
     * the first one found also starts an empty prompt */
    static const char *const ends[] = {"<|endoftext|>", "</s>", "<|end_of_text|>", "<|eot_id|>",
                                       "<|im_end|>"};
    uint32_t eod = 0, stop[5];
    int nstop = 0;
    for (size_t k = 0; rc == GRIT_OK && k < sizeof ends / sizeof *ends; k++)
        if (bpe_token_id(tok, ends[k], strlen(ends[k]), &stop[nstop]) == GRIT_OK)
            nstop++;
    int has_eod = nstop > 0;
    if (has_eod)
        eod = stop[0];
    if (rc == GRIT_OK)
        rc = bpe_ctx_open(&ctx, tok);
    /* a tokenizer.json's post-processor adds BOS as Hugging Face's encode does (Llama) */
    if (rc == GRIT_OK && chat) {
        sft_template t;
        if ((rc = sft_template_parse(chat, &t)) == GRIT_OK)
            rc = messages ? render_messages(tok, hf, t, messages, &ids)
                          : sft_render_prompt(tok, hf, t, prompt ? prompt : "", &ids, NULL);
    } else if (rc == GRIT_OK && prompt && *prompt)
        rc = bpe_encode(ctx, prompt, strlen(prompt),
                        hf ? BPE_ALLOW_SPECIAL | BPE_ADD_SPECIAL : 0, &ids);
    if (rc == GRIT_OK)
        rc = pretrained_load(ckdir, &m, nt, where, sizeof where);
    if (rc != GRIT_OK) {
        fprintf(stderr, "grit generate: %s\n", grit_errmsg());
        goto out;
    }
    if (ids.n == 0) {
        if (!has_eod) {
            fprintf(stderr, "grit generate: empty prompt and no end-of-text token "
                            "(<|endoftext|>, </s>, <|end_of_text|>) to start from\n");
            goto out;
        }
        ids.v = malloc(sizeof *ids.v);
        if (!ids.v)
            goto out;
        ids.v[0] = eod;
        ids.n = ids.cap = 1;
    }
    int V = m.cfg.vocab, ctxlen = m.cfg.max_positions;
    if ((int)ids.n >= ctxlen) {
        fprintf(stderr, "grit generate: the prompt has %zu tokens; the model's context is %d\n",
                ids.n, ctxlen);
        goto out;
    }
    int want = (int)max_tokens;
    if ((int)ids.n + want > ctxlen)
        want = ctxlen - (int)ids.n;
    if ((rc = gxi_init(&s, &m, (int)ids.n + want > 0 ? (int)ids.n + want : 1, 256, nt)) !=
            GRIT_OK ||
        !(logits = malloc(sizeof *logits * (size_t)V))) {
        fprintf(stderr, "grit generate: %s\n", rc ? grit_errmsg() : "out of memory");
        goto out;
    }
    rng_t rng;
    rng_seed(&rng, (uint64_t)seed, 0x67656e); /* stream "gen" */
    if (prompt && !chat) /* a chat prints only the answer */
        fputs(prompt, stdout);
    fflush(stdout);
    double t0 = now_seconds();
    rc = gxi_forward(&s, (const int32_t *)ids.v, (int)ids.n, logits, NULL);
    double t1 = now_seconds();
    int made = 0;
    for (; rc == GRIT_OK && made < want; made++) {
        int32_t next = gxi_sample(&s, logits, temp, (int)top_k, top_p, &rng);
        int end = 0;
        for (int k = 0; k < nstop; k++)
            end |= (uint32_t)next == stop[k];
        if (end && !ignore_eod)
            break;
        emit(tok, next);
        if (made + 1 < want)
            rc = gxi_forward(&s, &next, 1, logits, NULL);
    }
    double t2 = now_seconds();
    fputc('\n', stdout);
    fflush(stdout);
    if (rc != GRIT_OK) {
        fprintf(stderr, "grit generate: %s\n", grit_errmsg());
        goto out;
    }
    if (!quiet)
        fprintf(stderr, "grit generate: %s: prompt %zu tokens (%.0f tokens/s), generated %d "
                        "tokens in %.3fs (%.1f tokens/s)\n",
                where, ids.n, (double)ids.n / (t1 - t0 > 0 ? t1 - t0 : 1e-9), made, t2 - t1,
                made / (t2 - t1 > 0 ? t2 - t1 : 1e-9));
    code = 0;
out:
    free(logits);
    gxi_free(&s);
    gx_free(&m);
    bpe_ids_free(&ids);
    bpe_ctx_close(ctx);
    bpe_close(tok);
    return code;
}
