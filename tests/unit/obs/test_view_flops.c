/* test_view_flops.c - the view's MFU takes FLOPs per token from the trainer's
 * train_start event (obs/ never parses the training config), and for a run written
 * before that field existed computes it from config.json's model section through
 * model/ - saying which in summary.flops_per_token_from; without either, no MFU. */
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "model/gptneox.h"
#include "obs/obs.h"

static void put(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    CHECK_INT(fs_write_durable(path, text, strlen(text)), GRIT_OK);
}

/* The view's last MFU point and the summary's source of FLOPs per token. */
static double last_mfu(const char *dir, const char **from)
{
    json_t *v = obs_view(dir, &(obs_cfg){.peak_tflops = 1}, 0);
    CHECK(v != NULL);
    json_t *mfu = json_object_get(json_object_get(v, "series"), "mfu");
    double r = json_is_number(json_array_get(mfu, 0)) ? json_number_value(json_array_get(mfu, 0))
                                                      : -1;
    static char buf[64];
    const char *f = json_string_value(
        json_object_get(json_object_get(v, "summary"), "flops_per_token_from"));
    snprintf(buf, sizeof buf, "%s", f ? f : "");
    *from = buf;
    json_decref(v);
    return r;
}

int main(void)
{
    char dir[] = "/tmp/grit-view-flops-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    put(dir, "metrics.jsonl", "{\"step\":1,\"loss\":3.5,\"grad_norm\":1,\"lr\":0.001,\"tokens\":"
                              "1000,\"tokens_per_s\":1000,\"step_time_s\":1}\n");
    put(dir, "config.json",
        "{\"model\": {\"preset\": \"\", \"hidden_size\": 64, \"num_layers\": 2, \"num_heads\": 4,"
        " \"intermediate_size\": 256, \"vocab_size\": 512}, \"optim\": {\"seq_len\": 64,"
        " \"grad_accum\": 2, \"global_batch\": 4}}\n");
    const char *from;

    /* an older run: no flops_per_token in train_start, so config.json's shape */
    put(dir, "events.jsonl", "{\"ts\":1,\"event\":\"train_start\",\"step\":0}\n");
    gx_config shape = {.hidden = 64, .layers = 2, .intermediate = 256, .vocab = 512, .heads = 4};
    double want = 1000 * gx_flops_per_token(&shape, 64) / 1e12;
    CHECK(want > 0);
    CHECK_NEAR(last_mfu(dir, &from), want, want * 1e-12);
    CHECK(!strcmp(from, "config.json"));

    /* the trainer's record wins over config.json (the latest train_start) */
    put(dir, "events.jsonl", "{\"ts\":1,\"event\":\"train_start\",\"step\":0,\"flops_per_token\":1e6}\n"
                             "{\"ts\":2,\"event\":\"train_start\",\"step\":0,\"flops_per_token\":5e9}\n");
    CHECK_NEAR(last_mfu(dir, &from), 1000 * 5e9 / 1e12, 1e-9);
    CHECK(!strcmp(from, "train_start"));

    /* neither: no MFU, no source, and no error */
    put(dir, "events.jsonl", "{\"ts\":1,\"event\":\"train_start\",\"step\":0}\n");
    put(dir, "config.json", "{\"model\": \"pythia-14m\"}\n");
    CHECK_NEAR(last_mfu(dir, &from), -1, 0);
    CHECK(!strcmp(from, ""));

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_failures != 0;
}
