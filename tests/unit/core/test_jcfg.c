/* test_jcfg.c - key location and typed getters of core/jcfg. */
#include "../check.h"
#include "core/jcfg.h"

#include <string.h>

int main(void)
{
    const char *doc = "{\n  \"a\": {\"b\": 1,\n        \"c\": [1, {\"x\": 2}],\n"
                      "        \"d\": \"s\\\"q\"},\n  \"e\": 2.5, \"f\": true\n}\n";
    jcfg j;
    CHECK_INT(jcfg_open_string(&j, "t.json", doc), GRIT_OK);
    int line, col;
    jcfg_locate(&j, "a.b", &line, &col);
    CHECK_INT(line, 2);
    CHECK_INT(col, 9);
    jcfg_locate(&j, "a.d", &line, &col);
    CHECK_INT(line, 4);
    CHECK_INT(col, 9);
    jcfg_locate(&j, "e", &line, &col);
    CHECK_INT(line, 5);
    CHECK_INT(col, 3);
    jcfg_locate(&j, "f", &line, &col);
    CHECK_INT(col, 13);
    jcfg_locate(&j, "a.zz", &line, &col);
    CHECK_INT(line, 0);
    /* array elements: "a.c[1]" is the object, "a.c[1].x" its key */
    jcfg_locate(&j, "a.c[1]", &line, &col);
    CHECK_INT(line, 3);
    CHECK_INT(col, 18);
    jcfg_locate(&j, "a.c[1].x", &line, &col);
    CHECK_INT(line, 3);
    CHECK_INT(col, 19);
    /* a missing key is reported at its nearest enclosing element */
    CHECK(jcfg_fail(&j, "a.c[1].y", "missing") == GRIT_ECONFIG &&
          strstr(grit_errmsg(), "t.json:3:18: field 'a.c[1].y': missing") != NULL);

    json_t *a = json_object_get(j.root, "a");
    long v = -1;
    CHECK_INT(jcfg_int(&j, a, "a", "b", 0, 10, &v), GRIT_OK);
    CHECK_INT(v, 1);
    v = 7;
    CHECK_INT(jcfg_int(&j, a, "a", "missing", 0, 10, &v), GRIT_OK);
    CHECK_INT(v, 7); /* absent keys keep the default */
    CHECK_INT(jcfg_int(&j, a, "a", "b", 2, 10, &v), GRIT_ECONFIG);
    CHECK_STR_HAS(grit_errmsg(), "t.json:2:9: field 'a.b': expected an integer in [2, 10], got 1");
    double d = 0;
    CHECK_INT(jcfg_num(&j, j.root, "", "e", 0, 1, &d), GRIT_ECONFIG);
    CHECK_STR_HAS(grit_errmsg(), "t.json:5:3: field 'e'");
    CHECK_INT(jcfg_num(&j, j.root, "", "e", 0, 3, &d), GRIT_OK);
    CHECK_NEAR(d, 2.5, 0);
    const char *s = NULL;
    CHECK_INT(jcfg_str(&j, a, "a", "b", NULL, &s), GRIT_ECONFIG);
    CHECK_STR_HAS(grit_errmsg(), "expected a string, got an integer");
    bool bl = false;
    CHECK_INT(jcfg_bool(&j, j.root, "", "f", &bl), GRIT_OK);
    CHECK(bl);
    static const char *const allowed[] = {"a", "e", NULL};
    CHECK_INT(jcfg_only(&j, j.root, "", allowed), GRIT_ECONFIG);
    CHECK_STR_HAS(grit_errmsg(), "field 'f': unknown field; expected one of: a, e");
    jcfg_close(&j);
    jcfg_close(&j); /* closing twice is harmless */

    CHECK_INT(jcfg_open_string(&j, "bad.json", "{\"a\": 1,\n\"b\": }"), GRIT_ECONFIG);
    CHECK_STR_HAS(grit_errmsg(), "bad.json:2:");
    CHECK_INT(jcfg_open(&j, "/nonexistent/x.json"), GRIT_EIO);
    CHECK_STR_HAS(grit_errmsg(), "/nonexistent/x.json: cannot open");
    CHECK_DONE();
}
