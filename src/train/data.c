/* data.c - the trainer's data sources behind one interface (see data.h). */
#include "train/data.h"

#include <string.h>

#include "data/synthetic.h"

grit_err train_data_open(train_data *d, const train_cfg *cfg)
{
    memset(d, 0, sizeof *d);
    d->cfg = cfg;
    if (strcmp(cfg->data_source, "synthetic") != 0)
        return grit_errf(GRIT_EINVAL, "data source '%s' is not supported", cfg->data_source);
    return GRIT_OK;
}

grit_err train_data_fill(train_data *d, long first, int n, int len, int32_t *out)
{
    syn_fill(d->cfg->seed, d->cfg->synthetic_vocab, first, n, len, out);
    return GRIT_OK;
}

double train_data_epochs(const train_data *d, long samples)
{
    (void)d;
    (void)samples;
    return 0.0;
}

void train_data_close(train_data *d)
{
    if (d)
        memset(d, 0, sizeof *d);
}
