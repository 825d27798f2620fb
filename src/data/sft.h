/*
 * sft.h - supervised fine-tuning examples: chat / instruction JSONL turned
 * into an indexed dataset with a loss mask (sft_prep.c), and training rows
 * built from it, packed or padded (sft_set.c). docs/sft.md is the user's
 * description; this is the contract.
 *
 * On disk (written by sft_prepare, read by sft_open): two Megatron indexed
 * datasets with the same sequence sizes, one sequence per example:
 *   PREFIX.bin/.idx       the example's token ids (uint16 or int32, as tokens)
 *   PREFIX.mask.bin/.idx  uint8 (dtype code 1), 1 where the token is part of
 *                         the answer (its loss counts when it is a target), else 0
 * So the tokens stay a plain Megatron dataset any tool reads.
 *
 * Input lines (JSONL, one example per line; blank lines skipped):
 *   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}
 *   {"prompt": "...", "response": "..."}   ("completion" is taken for "response")
 * Templates (a piece's mask is 0 unless marked [1]; EOS/BOS are the
 * tokenizer's tokens, written as text and recognised as special tokens, as
 * Hugging Face's apply_chat_template renders them):
 *   plain   prompt/response only: BOS as the tokenizer's post-processor adds it,
 *           the prompt, then [1] response EOS
 *   llama2  "<s>[INST] " [<<SYS>>\n system \n<</SYS>>\n\n] user " [/INST]", [1] " " answer " </s>"
 *   llama3  "<|begin_of_text|>", per message "<|start_header_id|>" role
 *           "<|end_header_id|>\n\n", then content "<|eot_id|>" ([1] for the assistant)
 *   chatml  per message "<|im_start|>" role "\n", then content "<|im_end|>" ([1] for the
 *           assistant), "\n"
 *   zephyr  per message "<|" role "|>\n", then content EOS ([1] for the assistant), "\n"
 * Every piece is tokenized on its own and the ids concatenated.
 *
 * Rows (sft_set): examples of the training split (data.split over examples)
 * are visited in a seeded shuffle per epoch; epoch e's order is a pure function
 * of (seed, e). Padded: one example per row, cut at row_len, the rest padding.
 * Packed: examples back to back in that order; one that does not fit in the
 * row's remaining space starts the next row (an example longer than a row is
 * cut). A row's mask is 0 at padding and at the first token of every example,
 * so no example learns to predict the next one; seg gives each input position
 * the start of its example (model/gptneox.h gx_batch), so packed examples
 * never see each other.
 *
 * Ownership: sft_open allocates, sft_close frees (NULL is a no-op).
 */
#ifndef GRIT_DATA_SFT_H
#define GRIT_DATA_SFT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/bpe.h"

/* --- JSONL -> dataset (sft_prep.c) ------------------------------------------ */

typedef enum sft_template {
    SFT_TPL_AUTO = 0, /* from tokenizer_config.json's chat_template beside the tokenizer */
    SFT_TPL_PLAIN, SFT_TPL_LLAMA2, SFT_TPL_LLAMA3, SFT_TPL_CHATML, SFT_TPL_ZEPHYR
} sft_template;

/* "auto", "plain", "llama2", "llama3", "chatml", "zephyr"; GRIT_EINVAL otherwise. */
grit_err sft_template_parse(const char *name, sft_template *out);
const char *sft_template_name(sft_template t);

/* Recognises a Hugging Face chat_template (Jinja text, not run) by the markers of the
 * formats above. GRIT_EINVAL, naming `what` and the formats, when none matches. */
grit_err sft_template_detect(const char *jinja, const char *what, sft_template *out);

typedef struct sft_prep_opts {
    const bpe *tok;            /* borrowed */
    const char *tokenizer_path; /* for auto: tokenizer_config.json in its folder */
    sft_template tpl;
    const char *eos, *bos;     /* token texts; NULL: found in the vocabulary */
    const char *const *inputs; /* JSONL files */
    int n_inputs;
    const char *output_prefix; /* PREFIX.bin/.idx and PREFIX.mask.bin/.idx */
} sft_prep_opts;

typedef struct sft_prep_stats {
    uint64_t examples, tokens, answer_tokens;
    sft_template tpl;          /* the template used (auto resolved) */
} sft_prep_stats;

/* Writes both datasets durably, or nothing. Errors name file:line and field. */
grit_err sft_prepare(const sft_prep_opts *o, sft_prep_stats *st);

/* A prompt for generation: one user message rendered with template t (auto: from
 * tokenizer_config.json beside tokenizer_path) followed by the assistant's header, so
 * the model's continuation is the answer. Appends to out (caller-owned); *used (may be
 * NULL) receives the template applied. */
grit_err sft_render_prompt(const bpe *tok, const char *tokenizer_path, sft_template t,
                           const char *user, bpe_ids *out, sft_template *used);

/* The template `auto` stands for (tokenizer_config.json's chat_template beside
 * tokenizer_path); any other t is returned as it is. */
grit_err sft_template_resolve(const char *tokenizer_path, sft_template t, sft_template *out);

/* One chat message: role "system", "user" or "assistant" (checked by the caller: system
 * first only, then user and assistant alternating, user first). */
typedef struct sft_msg {
    const char *role, *content;
} sft_msg;

/* A conversation for generation: ms[0..n) rendered with template t (not auto) followed by
 * the assistant's header, as sft_render_prompt does for one user message. Appends to out. */
grit_err sft_render_chat(const bpe *tok, sft_template t, const sft_msg *ms, int n,
                         bpe_ids *out);

/* --- dataset -> training rows (sft_set.c) ------------------------------------- */

typedef struct sft_set sft_set;

/* Opens PREFIX's two datasets, takes the training split (gptdataset.h gpt_split
 * over examples) and lays out rows of row_len tokens until nrows exist. Token
 * ids must be below vocab (checked here, naming the file). */
grit_err sft_open(sft_set **out, const char *prefix, const char *split, int row_len,
                  uint64_t seed, int64_t nrows, bool pack, int vocab);
void sft_close(sft_set *s);

int64_t sft_rows(const sft_set *s);
/* Examples in the training split, and its tokens (an epoch). */
int64_t sft_examples(const sft_set *s);
int64_t sft_epoch_tokens(const sft_set *s);
/* Rows laid out for the first `rows` rows' examples: epochs consumed. */
double sft_epochs(const sft_set *s, int64_t rows);

/* Row `row`: tok [row_len], mask [row_len] (1 = target counts), seg [row_len - 1]. */
grit_err sft_fill(const sft_set *s, int64_t row, int32_t *tok, uint8_t *mask, int32_t *seg);

#endif
