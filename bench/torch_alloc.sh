# torch_alloc.sh - sourced by the benches that run PyTorch: the allocator PyTorch runs with.
# PyTorch on the CPU allocates and frees its activations and gradients with malloc at every
# step; glibc hands blocks over 32 MiB back to the kernel at free (mmap/munmap), so each step
# page-faults its whole working set in again. On this project's VMs a page fault is costly
# (one run of pythia-14m spent 30% of its time in the hypervisor's fault path and 5% clearing
# pages: 410 tok/s with glibc, 2,609 with tcmalloc, 1,738 with jemalloc without decay).
# Intel's and PyTorch's CPU tuning guides name tcmalloc or jemalloc for this, so the peer
# "at its best" runs with tcmalloc (Debian libtcmalloc-minimal4) where it is installed.
# TORCH_MALLOC=glibc keeps glibc's malloc; TORCH_MALLOC=/path/lib.so preloads another.
# grit's step loop allocates nothing (its buffers are pre-faulted at set-up,
# src/core/bigalloc.h), so grit runs with the default allocator.
TORCH_MALLOC=${TORCH_MALLOC:-/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4}
torch_env=()
if [ "$TORCH_MALLOC" != glibc ] && [ -e "$TORCH_MALLOC" ]; then
  torch_env=(env "LD_PRELOAD=$TORCH_MALLOC")
fi
echo "# PyTorch's allocator: ${torch_env[1]:-glibc malloc}"
