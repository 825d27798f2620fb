/* test_memory.c - the memory patterns pass on a small buffer; an injected bit flip is
 * named with its pattern, offset and bit; a slow copy fails the bandwidth floor. */
#include "../check.h"
#include "health/health.h"

int main(void)
{
    health_opts o;
    health_opts_defaults(&o, HEALTH_QUICK);
    o.mem_max_bytes = (size_t)4 << 20;
    health_report r;
    health_report_init(&r, HEALTH_QUICK);
    CHECK_INT(health_check_memory(&r, &o), GRIT_OK);
    CHECK_INT(r.n, 2);
    CHECK_INT(r.results[0].verdict, HEALTH_PASS);
    CHECK_STR_HAS(r.results[0].reason, "4.0 MiB");
    CHECK_INT(r.results[1].verdict, HEALTH_PASS);
    CHECK(r.results[1].measured > 0.5);

    o.faults = 1u << HF_MEMORY_CORRUPT;
    o.fault_bit = 5;
    health_report_init(&r, HEALTH_QUICK);
    health_check_memory(&r, &o);
    CHECK_INT(r.results[0].verdict, HEALTH_FAIL);
    CHECK_STR_HAS(r.results[0].reason, "address-in-address: word at offset 0x");
    CHECK_STR_HAS(r.results[0].reason, "lowest bit 5");
    CHECK_NEAR(r.results[0].measured, 1, 0);

    o.faults = 1u << HF_SLOW_MEMORY;
    health_report_init(&r, HEALTH_QUICK);
    health_check_memory(&r, &o);
    CHECK_INT(r.results[0].verdict, HEALTH_PASS);
    CHECK_INT(r.results[1].verdict, HEALTH_FAIL);
    CHECK_STR_HAS(r.results[1].reason, "below");
    health_report_free(&r);
    CHECK_DONE();
}
