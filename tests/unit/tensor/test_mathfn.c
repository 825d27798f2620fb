/* test_mathfn.c - accuracy of the vectorizable exp/erfc against libm in double. */
#include "../check.h"
#include "tensor/mathfn.h"

int main(void)
{
    double worst = 0;
    for (double x = -87.0; x <= 88.0; x += 0.00173) {
        double want = exp((double)(float)x), got = mf_exp((float)x);
        double rel = fabs(got - want) / want;
        worst = rel > worst ? rel : worst;
    }
    printf("mf_exp worst relative error %.3g (%.2f ulp)\n", worst, worst / 5.96e-8);
    CHECK(worst < 3.0e-7);
    /* erfc: relative error <= 5e-7 for z <= 2; beyond, the float rounding of -z*z
     * inside the exponent dominates (relative 1e-5 at z = 9, where erfc ~ 1e-37) */
    double lim[3][3] = {{0, 2, 5e-7}, {2, 5, 3e-6}, {5, 9, 1e-5}};
    for (int k = 0; k < 3; k++) {
        worst = 0;
        for (double z = lim[k][0]; z <= lim[k][1]; z += 0.0007) {
            double want = erfc((double)(float)z), got = mf_erfc_pos((float)z);
            double rel = fabs(got - want) / want;
            worst = rel > worst ? rel : worst;
        }
        printf("mf_erfc on [%g, %g]: worst relative error %.3g\n", lim[k][0], lim[k][1], worst);
        CHECK(worst < lim[k][2]);
    }
    CHECK(mf_exp(-1000.0f) >= 0.0f && mf_exp(-1000.0f) < 1e-37f);
    CHECK(isfinite(mf_exp(1000.0f)));
    CHECK_NEAR(mf_exp(0.0f), 1.0, 0);
    CHECK_DONE();
}
