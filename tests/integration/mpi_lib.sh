# mpi_lib.sh - the preamble the MPI integration tests share (sourced after set -euo pipefail):
# $here (this directory), a temp dir $tmp removed on exit, Open MPI allowed to run as root and
# oversubscribe the cores, mpirun required (a clear failure without it), fail=0.
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps installs openmpi-bin)"; exit 1; }
fail=0
