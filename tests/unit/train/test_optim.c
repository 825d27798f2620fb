/* test_optim.c - LR schedule shape and clip coefficient. */
#include "../check.h"
#include "train/optim.h"

int main(void)
{
    optim_cfg o = {.lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 10, .total_steps = 110,
                   .grad_clip = 1.0};
    CHECK_NEAR(optim_lr(&o, 0), 1e-4, 1e-15);          /* (0+1)/10 of lr */
    CHECK_NEAR(optim_lr(&o, 9), 1e-3, 1e-15);          /* end of warmup */
    CHECK_NEAR(optim_lr(&o, 10), 1e-3, 1e-15);         /* cosine starts at lr */
    CHECK_NEAR(optim_lr(&o, 60), 5.5e-4, 1e-12);       /* half way: mean of lr and min_lr */
    CHECK_NEAR(optim_lr(&o, 110), 1e-4, 1e-15);        /* end */
    CHECK_NEAR(optim_lr(&o, 500), 1e-4, 1e-15);        /* held at min_lr */
    CHECK_NEAR(optim_clip_coef(&o, 0.5), 1.0, 0);
    CHECK_NEAR(optim_clip_coef(&o, 4.0), 1.0 / (4.0 + 1e-6), 1e-7);
    o.grad_clip = 0;
    CHECK_NEAR(optim_clip_coef(&o, 1e9), 1.0, 0);
    CHECK_DONE();
}
