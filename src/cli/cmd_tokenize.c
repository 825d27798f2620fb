/* cmd_tokenize.c - `grit tokenize INPUT... -o PREFIX`: corpus -> .bin/.idx. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/progress.h"
#include "data/bpe.h"
#include "data/sft.h"
#include "data/tokenize.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit tokenize INPUT... -o PREFIX (--tokenizer FILE | --vocab FILE --merges FILE)\n"
            "\n"
            "Tokenizes text files, JSONL files ({\"text\": ...} per line) or directories of\n"
            "them into a Megatron indexed dataset PREFIX.bin + PREFIX.idx: one document per\n"
            "text file or JSONL line, each followed by the end-of-document token, in input\n"
            "order (directories walked recursively in name order). Documents are encoded on\n"
            "several threads; memory does not grow with the corpus.\n"
            "\n"
            "options:\n"
            "  -o, --output PREFIX   output prefix (required)\n"
            "  --tokenizer FILE      any Hugging Face tokenizer.json with a BPE model (GPT-2,\n"
            "                        GPT-NeoX, Llama 2/3, Falcon, Mistral, ...) or a\n"
            "                        SentencePiece .model; special tokens in the text are\n"
            "                        recognised and the post-processor's BOS is added, as\n"
            "                        HF does; invalid UTF-8 becomes U+FFFD (docs/tokenizers.md)\n"
            "  --vocab FILE          GPT-2 vocab.json (with --merges); special tokens in the\n"
            "  --merges FILE         text are plain text, as OpenAI's encoder does\n"
            "  --threads N           encoding threads (default: CPUs online)\n"
            "  --format F            auto (by extension: .jsonl/.json are JSONL), text, jsonl\n"
            "  --field NAME          JSONL field holding the text (default \"text\")\n"
            "  --eod TOKEN           end-of-document token (default: the first of\n"
            "                        <|endoftext|>, </s>, <|end_of_text|> in the vocabulary)\n"
            "  --byte-exact          encode invalid UTF-8 as raw bytes (default: as U+FFFD, as\n"
            "                        Hugging Face tokenizers and tiktoken see it); a byte the\n"
            "                        vocabulary has no token for is then an error\n"
            "  --sft                 fine-tuning examples: JSONL lines {\"messages\": [{\"role\",\n"
            "                        \"content\"}, ...]} or {\"prompt\", \"response\"}, rendered\n"
            "                        with --template into PREFIX.bin/.idx (one example per\n"
            "                        sequence) and the loss mask PREFIX.mask.bin/.idx (uint8,\n"
            "                        1 on answer tokens); train with data.source \"sft\"\n"
            "                        (docs/sft.md)\n"
            "  --template T          with --sft: auto (tokenizer_config.json's chat_template\n"
            "                        beside --tokenizer, recognised, not run), plain, llama2,\n"
            "                        llama3, chatml, zephyr (default auto)\n"
            "  --quiet               no progress line or summary\n"
            "  -h, --help            show this help\n");
}

typedef struct prog {
    progress p;
    double last;
    int on;
} prog;

static void on_progress(void *arg, const tokenize_stats *st)
{
    prog *pg = arg;
    double t = now_seconds();
    if (!pg->on || (t - pg->last < (pg->p.tty ? 0.2 : 5.0) && st->bytes_done < st->bytes_total))
        return;
    pg->last = t;
    if (pg->p.total <= 1) /* the total is known once the inputs are listed */
        pg->p.total = st->bytes_total >> 10 > 0 ? (long)(st->bytes_total >> 10) : 1;
    char text[160];
    double mb = (double)st->bytes_done / 1e6;
    snprintf(text, sizeof text, "%.1f MB/s | %llu docs | %llu tokens",
             st->seconds > 0 ? mb / st->seconds : 0.0, (unsigned long long)st->docs,
             (unsigned long long)st->tokens);
    progress_update(&pg->p, (long)(st->bytes_done >> 10), text);
}

int cmd_tokenize(int argc, char **argv)
{
    const char *out = NULL, *hf = NULL, *vocab = NULL, *merges = NULL, *field = NULL;
    const char *eod_tok = NULL, *tpl_name = NULL;
    int sft = 0;
    const char **inputs = calloc((size_t)argc, sizeof *inputs);
    int n_in = 0, quiet = 0, byte_exact = 0, format = TOKENIZE_AUTO;
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    int code = 2;
    bpe *tok = NULL;
    if (!inputs)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            code = 0;
            goto done;
        } else if (!strcmp(a, "--byte-exact")) {
            byte_exact = 1;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--sft")) {
            sft = 1;
        } else if (!strcmp(a, "--template") && has_val) {
            tpl_name = argv[++i];
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && has_val) {
            out = argv[++i];
        } else if (!strcmp(a, "--tokenizer") && has_val) {
            hf = argv[++i];
        } else if (!strcmp(a, "--vocab") && has_val) {
            vocab = argv[++i];
        } else if (!strcmp(a, "--merges") && has_val) {
            merges = argv[++i];
        } else if (!strcmp(a, "--field") && has_val) {
            field = argv[++i];
        } else if (!strcmp(a, "--eod") && has_val) {
            eod_tok = argv[++i];
        } else if (!strcmp(a, "--format") && has_val) {
            const char *f = argv[++i];
            format = !strcmp(f, "auto") ? TOKENIZE_AUTO : !strcmp(f, "text") ? TOKENIZE_TEXT
                     : !strcmp(f, "jsonl") ? TOKENIZE_JSONL : -1;
            if (format < 0) {
                fprintf(stderr, "grit tokenize: --format: expected auto, text or jsonl, got "
                                "'%s'\n", f);
                goto done;
            }
        } else if (!strcmp(a, "--threads") && has_val) {
            if (cli_long("tokenize", a, argv[++i], 1, 1024, &threads))
                goto done;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "grit tokenize: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            goto done;
        } else {
            inputs[n_in++] = a;
        }
    }
    if (!out || !n_in || (!hf == !vocab) || (!vocab != !merges)) {
        fprintf(stderr, "grit tokenize: %s\n",
                !n_in  ? "no input given"
                : !out ? "missing -o PREFIX"
                       : "give either --tokenizer FILE or --vocab FILE --merges FILE");
        usage(stderr);
        goto done;
    }
    code = 1;
    grit_err rc = hf ? bpe_open_hf(&tok, hf) : bpe_open_gpt2(&tok, vocab, merges);
    if (rc != GRIT_OK) {
        fprintf(stderr, "grit tokenize: %s\n", grit_errmsg());
        goto done;
    }
    uint32_t eod;
    static const char *const eods[] = {"<|endoftext|>", "</s>", "<|end_of_text|>"};
    for (size_t k = 0; !eod_tok && k < sizeof eods / sizeof *eods; k++)
        if (bpe_token_id(tok, eods[k], strlen(eods[k]), &eod) == GRIT_OK)
            eod_tok = eods[k];
    if (!eod_tok) {
        fprintf(stderr, "grit tokenize: the tokenizer has none of <|endoftext|>, </s>, <|end_of_text|>: "
                        "name the end-of-document token with --eod\n");
        goto done;
    }
    if (bpe_token_id(tok, eod_tok, strlen(eod_tok), &eod) != GRIT_OK) {
        fprintf(stderr, "grit tokenize: the tokenizer has no token '%s' (--eod)\n", eod_tok);
        goto done;
    }
    if (sft || tpl_name) {
        sft_template tpl = SFT_TPL_AUTO;
        sft_prep_stats ss;
        if (!sft || (tpl_name && sft_template_parse(tpl_name, &tpl) != GRIT_OK)) {
            fprintf(stderr, "grit tokenize: --template: %s\n",
                    sft ? grit_errmsg() : "expected only with --sft");
            code = 2;
            goto done;
        }
        sft_prep_opts so = {.tok = tok, .tokenizer_path = hf, .tpl = tpl, .eos = eod_tok,
                            .inputs = inputs, .n_inputs = n_in, .output_prefix = out};
        if (sft_prepare(&so, &ss) != GRIT_OK) {
            fprintf(stderr, "grit tokenize: %s\n", grit_errmsg());
            goto done;
        }
        if (!quiet)
            fprintf(stderr, "grit tokenize: %s.{bin,idx} + %s.mask.{bin,idx}: %llu examples, "
                            "%llu tokens, %llu answer tokens (loss counted), template %s\n",
                    out, out, (unsigned long long)ss.examples, (unsigned long long)ss.tokens,
                    (unsigned long long)ss.answer_tokens, sft_template_name(ss.tpl));
        code = 0;
        goto done;
    }
    prog pg = {.on = !quiet};
    int flags = (hf ? BPE_ALLOW_SPECIAL | BPE_ADD_SPECIAL : 0) | (byte_exact ? BPE_BYTE_EXACT : 0);
    tokenize_opts o = {.tok = tok, .encode_flags = flags, .eod = eod,
                       .inputs = inputs, .n_inputs = n_in, .output_prefix = out,
                       .format = format, .field = field, .threads = (int)threads,
                       .on_progress = on_progress, .arg = &pg};
    tokenize_stats st;
    progress_init(&pg.p, stderr, 1, 1);
    pg.last = -1e9;
    rc = tokenize_run(&o, &st);
    if (rc != GRIT_OK) {
        if (!quiet && pg.p.tty)
            fputc('\n', stderr);
        fprintf(stderr, "grit tokenize: %s\n", grit_errmsg());
        goto done;
    }
    if (!quiet) {
        progress_finish(&pg.p);
        double mb = (double)st.bytes_done / 1e6;
        fprintf(stderr,
                "grit tokenize: %s.{bin,idx}: %llu files, %llu documents (%llu empty skipped), "
                "%llu tokens, %.1f MB, %.2f bytes/token, %.2fs, %.1f MB/s, %.2f M tokens/s on %ld "
                "threads\n",
                out, (unsigned long long)st.files, (unsigned long long)st.docs,
                (unsigned long long)st.empty_docs, (unsigned long long)st.tokens, mb,
                st.tokens ? (double)st.bytes_done / (double)st.tokens : 0.0, st.seconds,
                st.seconds > 0 ? mb / st.seconds : 0.0,
                st.seconds > 0 ? (double)st.tokens / st.seconds / 1e6 : 0.0, threads);
        if (st.replaced_bytes)
            fprintf(stderr, "grit tokenize: %llu bytes of invalid UTF-8 encoded as U+FFFD (as "
                            "the reference tokenizers see them; --byte-exact keeps the bytes)\n",
                    (unsigned long long)st.replaced_bytes);
    }
    code = 0;
done:
    bpe_close(tok);
    free(inputs);
    return code;
}
