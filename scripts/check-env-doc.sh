#!/usr/bin/env bash
# check-env-doc.sh [DOC [DIR...]] - fails (exit 1) when the code reads a GRIT_*
# environment variable that DOC (default docs/env.md) does not list. A variable is
# "read" when its name is a whole string literal in a .c/.h/.cc file under DIRs
# (default src/ and plugins/): getenv("GRIT_X"), a table of names, prog("GRIT_X",..);
# "listed" when DOC names it in backquotes (`GRIT_X`).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
doc=${1:-$here/docs/env.md}
shift || true
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=("$here/src" "$here/plugins")
[ -r "$doc" ] || { echo "check-env-doc: $doc: cannot read"; exit 2; }
bad=0 n=0
while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; name=${rest#*:}; name=${name//\"/}
  n=$((n + 1))
  if ! grep -qF "\`$name\`" "$doc"; then
    echo "check-env-doc: $file:$line reads $name, which $doc does not list (name, what, who sets it, who reads it, test or product)"
    bad=1
  fi
done < <(grep -rnoE '"GRIT_[A-Z0-9_]+"' "${dirs[@]}" --include='*.c' --include='*.h' --include='*.cc' 2>/dev/null || true)
[ $bad -eq 0 ] || exit 1
echo "check-env-doc: all $n reads of GRIT_* variables in ${dirs[*]} are listed in $doc"
