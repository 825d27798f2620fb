/*
 * sft_prep.c - chat / instruction JSONL -> token and loss-mask datasets (see
 * sft.h for the formats and templates).
 *
 * One thread, one line at a time: parse, check the fields, render the
 * template as pieces (special tokens by id, text encoded with the tokenizer
 * without recognising special tokens, so a message cannot inject one), and
 * append the example to both writers. Templates are written here from the
 * published formats; Jinja is never run: an auto template is recognised by
 * its markers, and anything else is a clear error naming the file.
 */
#include "data/sft.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/indexed.h"

static const char *const tpl_names[] = {"auto", "plain", "llama2", "llama3", "chatml", "zephyr"};

grit_err sft_template_parse(const char *name, sft_template *out)
{
    for (int i = 0; i < (int)(sizeof tpl_names / sizeof *tpl_names); i++)
        if (!strcmp(name, tpl_names[i])) {
            *out = (sft_template)i;
            return GRIT_OK;
        }
    return grit_errf(GRIT_EINVAL, "template '%s': expected one of auto, plain, llama2, llama3, "
                                  "chatml, zephyr", name);
}

const char *sft_template_name(sft_template t)
{
    return (int)t >= 0 && t <= SFT_TPL_ZEPHYR ? tpl_names[t] : "?";
}

grit_err sft_template_detect(const char *j, const char *what, sft_template *out)
{
    if (strstr(j, "<|start_header_id|>") && strstr(j, "<|eot_id|>"))
        *out = SFT_TPL_LLAMA3;
    else if (strstr(j, "<|im_start|>") && strstr(j, "<|im_end|>"))
        *out = SFT_TPL_CHATML;
    else if (strstr(j, "[INST]") && strstr(j, "[/INST]"))
        *out = SFT_TPL_LLAMA2;
    else if (strstr(j, "<|user|>") && strstr(j, "<|assistant|>"))
        *out = SFT_TPL_ZEPHYR;
    else
        return grit_errf(GRIT_EINVAL, "%s: chat_template: not one of the formats grit renders "
                                      "(llama2 [INST], llama3 <|start_header_id|>, chatml "
                                      "<|im_start|>, zephyr <|user|>); grit does not run Jinja: "
                                      "give the template by name (--template)", what);
    return GRIT_OK;
}

/* The chat_template of tokenizer_config.json beside the tokenizer file. */
static grit_err auto_template(const char *tokpath, sft_template *out)
{
    char path[1200];
    const char *slash = tokpath ? strrchr(tokpath, '/') : NULL;
    if (slash)
        snprintf(path, sizeof path, "%.*s/tokenizer_config.json", (int)(slash - tokpath), tokpath);
    else
        snprintf(path, sizeof path, "tokenizer_config.json");
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return grit_errf(GRIT_EINVAL, "%s: cannot read (%s): the auto template needs the "
                                      "tokenizer's tokenizer_config.json; give --template",
                         path, je.text);
    json_t *ct = json_object_get(root, "chat_template");
    if (json_is_array(ct)) { /* [{"name": "default", "template": "..."}, ...] */
        json_t *pick = NULL, *e;
        size_t i;
        json_array_foreach(ct, i, e) {
            const char *nm = json_string_value(json_object_get(e, "name"));
            if (!pick || (nm && !strcmp(nm, "default")))
                pick = e;
        }
        ct = json_object_get(pick, "template");
    }
    char what[1300];
    snprintf(what, sizeof what, "%s", path);
    grit_err rc = json_is_string(ct)
                      ? sft_template_detect(json_string_value(ct), what, out)
                      : grit_errf(GRIT_EINVAL, "%s: chat_template: missing (expected the "
                                               "tokenizer's chat template); give --template",
                                  path);
    json_decref(root);
    return rc;
}

typedef struct ex_buf {
    bpe_ids ids;
    uint32_t *mask;
    size_t cap;
    bpe_ctx *ctx;
    const bpe *tok;
} ex_buf;

static grit_err mask_fit(ex_buf *b)
{
    if (b->ids.n <= b->cap)
        return GRIT_OK;
    size_t c = b->ids.n * 2;
    uint32_t *m = realloc(b->mask, sizeof *m * c);
    if (!m)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    b->mask = m;
    b->cap = c;
    return GRIT_OK;
}

static grit_err put_text(ex_buf *b, const char *s, size_t len, int m, int flags)
{
    size_t n0 = b->ids.n;
    grit_err rc = bpe_encode(b->ctx, s, len, flags, &b->ids);
    if (rc == GRIT_OK)
        rc = mask_fit(b);
    for (size_t i = n0; rc == GRIT_OK && i < b->ids.n; i++)
        b->mask[i] = (uint32_t)m;
    return rc;
}

static grit_err put_str(ex_buf *b, const char *s, int m) { return put_text(b, s, strlen(s), m, 0); }

/* content with surrounding white space removed (Jinja's strip()) */
static grit_err put_stripped(ex_buf *b, const char *s, int m)
{
    size_t len = strlen(s);
    while (len && strchr(" \t\r\n", s[len - 1]))
        len--;
    while (len && strchr(" \t\r\n", *s)) {
        s++;
        len--;
    }
    return put_text(b, s, len, m, 0);
}

static grit_err put_tok(ex_buf *b, const char *text, int m)
{
    uint32_t id;
    if (bpe_token_id(b->tok, text, strlen(text), &id) != GRIT_OK)
        return grit_errf(GRIT_EINVAL, "the tokenizer has no token '%s' (the template needs it)",
                         text);
    if (b->ids.n == b->ids.cap) {
        size_t c = b->ids.cap ? b->ids.cap * 2 : 256;
        uint32_t *v = realloc(b->ids.v, sizeof *v * c);
        if (!v)
            return grit_errf(GRIT_ENOMEM, "out of memory");
        b->ids.v = v;
        b->ids.cap = c;
    }
    b->ids.v[b->ids.n++] = id;
    grit_err rc = mask_fit(b);
    if (rc == GRIT_OK)
        b->mask[b->ids.n - 1] = (uint32_t)m;
    return rc;
}

typedef sft_msg msg;

/* Renders one example's messages (roles already checked). */
static grit_err render(ex_buf *b, sft_template t, const msg *ms, int n, const char *bos,
                       const char *eos)
{
    grit_err rc = GRIT_OK;
#define R(x)                                                                                     \
    do {                                                                                         \
        if ((rc = (x)) != GRIT_OK)                                                               \
            return rc;                                                                           \
    } while (0)
    if (t == SFT_TPL_LLAMA3)
        R(put_tok(b, "<|begin_of_text|>", 0));
    for (int i = 0; i < n; i++) {
        int a = !strcmp(ms[i].role, "assistant");
        switch (t) {
        case SFT_TPL_LLAMA2:
            if (a) {
                R(put_str(b, " ", 1));
                R(put_stripped(b, ms[i].content, 1));
                R(put_str(b, " ", 1));
                R(put_tok(b, eos, 1));
            } else if (!strcmp(ms[i].role, "user")) {
                R(put_tok(b, bos, 0));
                char *sys = NULL;
                if (i > 0 && !strcmp(ms[i - 1].role, "system")) {
                    size_t k = strlen(ms[i - 1].content) + 32;
                    if (!(sys = malloc(k)))
                        return grit_errf(GRIT_ENOMEM, "out of memory");
                    snprintf(sys, k, "<<SYS>>\n%s\n<</SYS>>\n\n", ms[i - 1].content);
                }
                rc = put_str(b, "[INST] ", 0);
                if (rc == GRIT_OK && sys)
                    rc = put_str(b, sys, 0);
                free(sys);
                R(rc);
                R(put_stripped(b, ms[i].content, 0));
                R(put_str(b, " [/INST]", 0));
            }
            break;
        case SFT_TPL_LLAMA3:
            R(put_tok(b, "<|start_header_id|>", 0));
            R(put_str(b, ms[i].role, 0));
            R(put_tok(b, "<|end_header_id|>", 0));
            R(put_str(b, "\n\n", 0));
            R(put_stripped(b, ms[i].content, a));
            R(put_tok(b, "<|eot_id|>", a));
            break;
        case SFT_TPL_CHATML:
            R(put_tok(b, "<|im_start|>", 0));
            R(put_str(b, ms[i].role, 0));
            R(put_str(b, "\n", 0));
            R(put_str(b, ms[i].content, a));
            R(put_tok(b, "<|im_end|>", a));
            R(put_str(b, "\n", 0));
            break;
        case SFT_TPL_ZEPHYR: {
            char head[64];
            snprintf(head, sizeof head, "<|%s|>\n", ms[i].role);
            R(put_str(b, head, 0));
            R(put_str(b, ms[i].content, a));
            R(put_tok(b, eos, a));
            R(put_str(b, "\n", 0));
            break;
        }
        default: /* plain: prompt (with the post-processor's BOS), then the answer and EOS */
            if (a) {
                R(put_str(b, ms[i].content, 1));
                R(put_tok(b, eos, 1));
            } else
                R(put_text(b, ms[i].content, strlen(ms[i].content), 0,
                           i == 0 ? BPE_ADD_SPECIAL : 0));
            break;
        }
    }
#undef R
    return rc;
}

/* Reads one line's example into ms[] (pointers into root). */
static grit_err parse_line(json_t *root, const char *where, sft_template t, msg *ms, int cap,
                           int *n)
{
    if (!json_is_object(root))
        return grit_errf(GRIT_EINVAL, "%s: expected a JSON object per line", where);
    json_t *msgs = json_object_get(root, "messages");
    json_t *p = json_object_get(root, "prompt"), *r = json_object_get(root, "response");
    if (!r)
        r = json_object_get(root, "completion");
    *n = 0;
    if (msgs) {
        if (!json_is_array(msgs) || json_array_size(msgs) == 0 ||
            json_array_size(msgs) > (size_t)cap)
            return grit_errf(GRIT_EINVAL, "%s: messages: expected a list of 1 to %d "
                                          "{\"role\", \"content\"} objects", where, cap);
        size_t i;
        json_t *m;
        json_array_foreach(msgs, i, m) {
            const char *role = json_string_value(json_object_get(m, "role"));
            const char *content = json_string_value(json_object_get(m, "content"));
            if (!role || (strcmp(role, "system") && strcmp(role, "user") &&
                          strcmp(role, "assistant")))
                return grit_errf(GRIT_EINVAL, "%s: messages[%zu].role: expected \"system\", "
                                              "\"user\" or \"assistant\"", where, i);
            if (!content)
                return grit_errf(GRIT_EINVAL, "%s: messages[%zu].content: expected a string",
                                 where, i);
            if (!strcmp(role, "system") && i != 0)
                return grit_errf(GRIT_EINVAL, "%s: messages[%zu].role: \"system\" only as the "
                                              "first message", where, i);
            ms[(*n)++] = (msg){role, content};
        }
    } else if (json_is_string(p) && json_is_string(r)) {
        ms[0] = (msg){"user", json_string_value(p)};
        ms[1] = (msg){"assistant", json_string_value(r)};
        *n = 2;
    } else
        return grit_errf(GRIT_EINVAL, "%s: expected \"messages\" (a list) or \"prompt\" and "
                                      "\"response\" (or \"completion\") strings", where);
    int answers = 0;
    for (int i = 0; i < *n; i++) {
        answers += !strcmp(ms[i].role, "assistant");
        int want_user = i == 0 || (i == 1 && !strcmp(ms[0].role, "system")) ||
                        !strcmp(ms[i - 1].role, "assistant");
        if (strcmp(ms[i].role, "system") && want_user != !strcmp(ms[i].role, "user"))
            return grit_errf(GRIT_EINVAL, "%s: messages[%d].role: expected \"%s\" (user and "
                                          "assistant turns alternate, user first)", where, i,
                             want_user ? "user" : "assistant");
    }
    if (!answers)
        return grit_errf(GRIT_EINVAL, "%s: messages: expected at least one \"assistant\" "
                                      "message (the answer the loss is computed on)", where);
    (void)t;
    return GRIT_OK;
}

static const char *find_eos(const bpe *tok, const char *given);

grit_err sft_template_resolve(const char *tokenizer_path, sft_template t, sft_template *out)
{
    *out = t;
    return t == SFT_TPL_AUTO ? auto_template(tokenizer_path, out) : GRIT_OK;
}

grit_err sft_render_chat(const bpe *tok, sft_template t, const sft_msg *ms, int n, bpe_ids *out)
{
    grit_err rc = GRIT_OK;
    const char *eos = find_eos(tok, NULL);
    if (!eos)
        return grit_errf(GRIT_EINVAL, "the tokenizer has none of <|endoftext|>, </s>, "
                                      "<|end_of_text|>");
    ex_buf b = {.tok = tok, .ids = *out};
    if ((rc = bpe_ctx_open(&b.ctx, tok)) == GRIT_OK && (rc = render(&b, t, ms, n, "<s>", eos)) ==
                                                           GRIT_OK) {
        switch (t) { /* the assistant's header: the model continues with the answer */
        case SFT_TPL_LLAMA3:
            if ((rc = put_tok(&b, "<|start_header_id|>", 0)) == GRIT_OK &&
                (rc = put_str(&b, "assistant", 0)) == GRIT_OK &&
                (rc = put_tok(&b, "<|end_header_id|>", 0)) == GRIT_OK)
                rc = put_str(&b, "\n\n", 0);
            break;
        case SFT_TPL_CHATML:
            if ((rc = put_tok(&b, "<|im_start|>", 0)) == GRIT_OK)
                rc = put_str(&b, "assistant\n", 0);
            break;
        case SFT_TPL_ZEPHYR:
            rc = put_str(&b, "<|assistant|>\n", 0);
            break;
        default: /* llama2 ends the prompt with [/INST]; plain is the prompt itself */
            break;
        }
    }
    bpe_ctx_close(b.ctx);
    free(b.mask);
    *out = b.ids;
    return rc;
}

grit_err sft_render_prompt(const bpe *tok, const char *tokenizer_path, sft_template t,
                           const char *user, bpe_ids *out, sft_template *used)
{
    grit_err rc = sft_template_resolve(tokenizer_path, t, &t);
    if (rc != GRIT_OK)
        return rc;
    if (used)
        *used = t;
    msg m = {"user", user};
    return sft_render_chat(tok, t, &m, 1, out);
}

static const char *find_eos(const bpe *tok, const char *given)
{
    static const char *const eos[] = {"<|endoftext|>", "</s>", "<|end_of_text|>"};
    uint32_t id;
    if (given)
        return given;
    for (size_t k = 0; k < sizeof eos / sizeof *eos; k++)
        if (bpe_token_id(tok, eos[k], strlen(eos[k]), &id) == GRIT_OK)
            return eos[k];
    return NULL;
}

grit_err sft_prepare(const sft_prep_opts *o, sft_prep_stats *st)
{
    memset(st, 0, sizeof *st);
    sft_template t = o->tpl;
    grit_err rc = GRIT_OK;
    if (t == SFT_TPL_AUTO && (rc = auto_template(o->tokenizer_path, &t)) != GRIT_OK)
        return rc;
    st->tpl = t;
    const char *eos = find_eos(o->tok, o->eos), *bos = o->bos ? o->bos : "<s>";
    if (!eos)
        return grit_errf(GRIT_EINVAL, "the tokenizer has none of <|endoftext|>, </s>, "
                                      "<|end_of_text|>: name the end-of-sequence token (--eod)");
    char mprefix[1100];
    snprintf(mprefix, sizeof mprefix, "%s.mask", o->output_prefix);
    idx_writer *wt = NULL, *wm = NULL;
    ex_buf b = {.tok = o->tok};
    char *line = NULL;
    size_t lcap = 0;
    FILE *f = NULL;
    int dtype = idx_dtype_for_vocab(bpe_vocab_size(o->tok));
    if ((rc = bpe_ctx_open(&b.ctx, o->tok)) != GRIT_OK ||
        (rc = idx_writer_open(&wt, o->output_prefix, dtype)) != GRIT_OK ||
        (rc = idx_writer_open(&wm, mprefix, IDX_DTYPE_U8)) != GRIT_OK)
        goto out;
    enum { MAXMSG = 4096 };
    msg *ms = malloc(sizeof *ms * MAXMSG);
    if (!ms) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    for (int k = 0; rc == GRIT_OK && k < o->n_inputs; k++) {
        if (!(f = fopen(o->inputs[k], "r"))) {
            rc = grit_errf(GRIT_EIO, "%s: cannot open", o->inputs[k]);
            break;
        }
        ssize_t got;
        for (long ln = 1; rc == GRIT_OK && (got = getline(&line, &lcap, f)) >= 0; ln++) {
            if (strspn(line, " \t\r\n") == (size_t)got)
                continue;
            char where[1200];
            snprintf(where, sizeof where, "%s:%ld", o->inputs[k], ln);
            json_error_t je;
            json_t *root = json_loadb(line, (size_t)got, 0, &je);
            if (!root) {
                rc = grit_errf(GRIT_EINVAL, "%s: column %d: %s", where, je.column, je.text);
                break;
            }
            int n = 0;
            b.ids.n = 0;
            rc = parse_line(root, where, t, ms, MAXMSG, &n);
            if (rc == GRIT_OK && t == SFT_TPL_PLAIN)
                for (int i = 0; rc == GRIT_OK && i < n; i++)
                    if (!strcmp(ms[i].role, "system"))
                        rc = grit_errf(GRIT_EINVAL, "%s: messages[%d].role: the plain template "
                                                    "has no system message", where, i);
            if (rc == GRIT_OK && (rc = render(&b, t, ms, n, bos, eos)) != GRIT_OK)
                rc = grit_errf(rc, "%s: %s", where, grit_errmsg());
            json_decref(root);
            if (rc == GRIT_OK && b.ids.n == 0)
                rc = grit_errf(GRIT_EINVAL, "%s: the example has no tokens", where);
            if (rc == GRIT_OK && (rc = idx_writer_add(wt, b.ids.v, b.ids.n)) == GRIT_OK &&
                (rc = idx_writer_end_doc(wt)) == GRIT_OK &&
                (rc = idx_writer_add(wm, b.mask, b.ids.n)) == GRIT_OK)
                rc = idx_writer_end_doc(wm);
            if (rc == GRIT_OK) {
                st->examples++;
                st->tokens += b.ids.n;
                for (size_t i = 0; i < b.ids.n; i++)
                    st->answer_tokens += b.mask[i];
            }
        }
        fclose(f);
        f = NULL;
    }
    free(ms);
    if (rc == GRIT_OK && st->examples == 0)
        rc = grit_errf(GRIT_EINVAL, "%s: no examples in the input", o->inputs[0]);
    if (rc == GRIT_OK) {
        rc = idx_writer_finish(wt);
        wt = NULL;
        if (rc == GRIT_OK) {
            rc = idx_writer_finish(wm);
            wm = NULL;
        }
    }
out:
    if (wt)
        idx_writer_abort(wt);
    if (wm)
        idx_writer_abort(wm);
    bpe_ctx_close(b.ctx);
    bpe_ids_free(&b.ids);
    free(b.mask);
    free(line);
    return rc;
}
