/* pretrained.c - load weights for inference (see pretrained.h). */
#include "ckpt/pretrained.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "ckpt/hf_family.h"
#include "ckpt/store.h"

static int exists(const char *dir, const char *name)
{
    char p[4096];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0;
}

grit_err pretrained_load(const char *path, gx_model *m, int nthreads, char *where, size_t cap)
{
    memset(m, 0, sizeof *m);
    store *st = NULL;
    char sub[256] = ".", root[4096], cfgpath[300];
    char *text = NULL;
    size_t len;
    grit_err rc;
    if (exists(path, "ckpt")) { /* a run directory (its config.json is grit's, not HF's) */
        snprintf(root, sizeof root, "%s/ckpt", path);
    } else if ((exists(path, "model.safetensors") || exists(path, "manifest.json")) &&
               exists(path, "config.json")) { /* a Hugging Face folder or a step folder
                                                 (model-parallel shards too) */
        snprintf(root, sizeof root, "%s", path);
    } else {
        return grit_errf(GRIT_ENOTFOUND, "%s: expected a checkpoint folder (config.json + "
                                         "model.safetensors, or a step folder with its "
                                         "manifest.json) or a run directory (ckpt/)", path);
    }
    if ((rc = store_open_posix(root, &st)) != GRIT_OK)
        return rc;
    if (strcmp(root, path) != 0 && (rc = ckpt_find(st, sub, sizeof sub, NULL, NULL)) != GRIT_OK) {
        rc = grit_errf(rc, "%s: no checkpoint that verifies (%s)", root, grit_errmsg());
        goto out;
    }
    snprintf(cfgpath, sizeof cfgpath, "%s/config.json", sub);
    if ((rc = store_read_all(st, cfgpath, &text, &len)) != GRIT_OK)
        goto out;
    gx_config cfg;
    char what[4400];
    snprintf(what, sizeof what, "%s/%s", root, cfgpath);
    if ((rc = hf_family_config_parse(what, text, &cfg)) != GRIT_OK ||
        (rc = ckpt_weights_fit(st, sub, &cfg)) != GRIT_OK ||
        (rc = gx_init(m, &cfg, 1, 1, nthreads)) != GRIT_OK)
        goto out;
    if ((rc = ckpt_load(st, sub, m, NULL, true)) != GRIT_OK) {
        gx_free(m);
        goto out;
    }
    if (where)
        snprintf(where, cap, "%s%s%s", root, strcmp(sub, ".") ? "/" : "",
                 strcmp(sub, ".") ? sub : "");
out:
    free(text);
    store_close(st);
    return rc;
}
