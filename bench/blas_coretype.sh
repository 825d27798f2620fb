# blas_coretype.sh - sourced by the benches: OpenBLAS's kernel choice, the same for grit and
# its peer. SkylakeX (AVX-512) where the CPU has avx512f, else Haswell (AVX2/FMA) where it has
# avx2; OPENBLAS_CORETYPE set by the caller wins. SkylakeX on a CPU without AVX-512 is an
# illegal instruction, so it is never forced there.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell
  fi
fi
echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset, the library chooses} for grit and its peer"
