/* test_state.c - the cluster store: clusters, nodes and operations survive a reopen;
 * a replaced node keeps its slot under a new NodeId; remove leaves nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "cluster/state.h"

int main(void)
{
    char dir[] = "/tmp/grit-state-XXXXXX", db[64], cmd[96];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(db, sizeof db, "%s/state.db", dir);
    cluster_state *st;
    CHECK_INT(cluster_state_open(&st, db), GRIT_OK);
    cluster_row r = {.name = "demo", .status = "Creating", .dir = "/x", .base = "/b"};
    CHECK_INT(cluster_state_add(st, &r, "{\"ClusterName\": \"demo\"}"), GRIT_OK);
    CHECK_INT(cluster_state_add(st, &r, "{}"), GRIT_EINVAL); /* no duplicate */
    cluster_node n = {.group = "workers", .slot = 2, .status = "Pending", .lifecycle_rc = -1};
    cluster_state_new_id(n.id);
    CHECK(strncmp(n.id, "i-", 2) == 0 && strlen(n.id) == 18);
    CHECK_INT(cluster_state_put_node(st, "demo", &n), GRIT_OK);
    snprintf(n.status, sizeof n.status, "Running"); /* update in place */
    CHECK_INT(cluster_state_put_node(st, "demo", &n), GRIT_OK);
    int64_t op;
    CHECK_INT(cluster_state_op_begin(st, "demo", "CreateCluster", "", &op), GRIT_OK);
    CHECK_INT(cluster_state_op_end(st, op, "Succeeded", "ok"), GRIT_OK);
    cluster_state_close(st);

    CHECK_INT(cluster_state_open(&st, db), GRIT_OK); /* reopen: all there */
    char *spec = NULL;
    CHECK_INT(cluster_state_get(st, "demo", &r, &spec), GRIT_OK);
    CHECK(spec && strstr(spec, "demo") && !strcmp(r.status, "Creating") && r.created > 0);
    free(spec);
    CHECK_INT(cluster_state_get(st, "nope", &r, NULL), GRIT_ENOTFOUND);
    cluster_node got;
    CHECK_INT(cluster_state_node(st, "demo", "n2", &got), GRIT_OK);
    CHECK(!strcmp(got.id, n.id) && !strcmp(got.status, "Running") && got.lifecycle_rc == -1);
    CHECK_INT(cluster_state_node(st, "demo", n.id, &got), GRIT_OK);
    CHECK_INT(cluster_state_node(st, "demo", "n3", &got), GRIT_ENOTFOUND);
    /* replace: the old row Terminated, a new NodeId in the same slot */
    snprintf(n.status, sizeof n.status, "Terminated");
    CHECK_INT(cluster_state_put_node(st, "demo", &n), GRIT_OK);
    cluster_node m = n;
    cluster_state_new_id(m.id);
    snprintf(m.status, sizeof m.status, "Pending");
    CHECK_INT(cluster_state_put_node(st, "demo", &m), GRIT_OK);
    cluster_node *rows;
    int k;
    CHECK_INT(cluster_state_nodes(st, "demo", 0, &rows, &k), GRIT_OK);
    CHECK_INT(k, 1);
    CHECK(k == 1 && !strcmp(rows[0].id, m.id));
    free(rows);
    CHECK_INT(cluster_state_nodes(st, "demo", 1, &rows, &k), GRIT_OK);
    CHECK_INT(k, 2);
    free(rows);
    char *ops;
    CHECK_INT(cluster_state_ops_json(st, "demo", 10, &ops), GRIT_OK);
    CHECK(ops && strstr(ops, "\"Kind\":\"CreateCluster\"") && strstr(ops, "\"Seconds\""));
    free(ops);
    CHECK_INT(cluster_state_remove(st, "demo"), GRIT_OK);
    CHECK_INT(cluster_state_nodes(st, "demo", 1, &rows, &k), GRIT_OK);
    CHECK_INT(k, 0);
    free(rows);
    cluster_row *all;
    CHECK_INT(cluster_state_list(st, &all, &k), GRIT_OK);
    CHECK_INT(k, 0);
    free(all);
    cluster_state_close(st);
    /* a path that cannot be opened is an error naming it */
    CHECK(cluster_state_open(&st, "/nonexistent/dir/state.db") == GRIT_EIO &&
          strstr(grit_errmsg(), "/nonexistent/dir/state.db"));
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_failures != 0;
}
