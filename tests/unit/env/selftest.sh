#!/usr/bin/env bash
# selftest.sh CHECK DOC - scripts/check-env-doc.sh fails on a planted read of a
# GRIT_* variable that the doc does not list (naming file and line), and passes
# once the doc lists it: the check of src/ (ctest unit.env_doc) can fail.
set -euo pipefail
check=$1
doc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/x"
printf '#include <stdlib.h>\nconst char *a(void) { return getenv("GRIT_SUP_ADDR"); }\n' > "$tmp/src/x/a.c"
printf 'const char *b(void)\n{\n    return getenv("GRIT_PLANTED_UNDOCUMENTED");\n}\n' > "$tmp/src/x/b.c"
rc=0
out=$("$check" "$doc" "$tmp/src" 2>&1) || rc=$?
if [ $rc -ne 1 ] || ! grep -q "b.c:3 reads GRIT_PLANTED_UNDOCUMENTED" <<<"$out" || grep -q GRIT_SUP_ADDR <<<"$out"; then
  echo "FAIL: expected exit 1 naming b.c:3 only, got exit $rc: $out"; exit 1
fi
{ cat "$doc"; echo '| `GRIT_PLANTED_UNDOCUMENTED` | planted | test | test |'; } > "$tmp/env.md"
if ! "$check" "$tmp/env.md" "$tmp/src" > /dev/null; then
  echo "FAIL: the variable is listed now, yet the check fails"; exit 1
fi
echo "env doc selftest: an undocumented read is caught (file and line), a listed one passes"
