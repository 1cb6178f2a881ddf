// preflight doctor: the warpgroup MMA synchronisation instructions, which
// exist only in arch-specific sm_90a code; a warpgroup (128 threads) runs
// them, then writes a pattern the parent verifies.
extern "C" __global__ void preflight_wgmma_fence(unsigned* out) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    out[threadIdx.x] = threadIdx.x * 3u;
}
