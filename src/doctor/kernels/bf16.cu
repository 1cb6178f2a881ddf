// preflight doctor: out = a * b + c computed by the bf16 FMA unit (sm_80+),
// through inline PTX so that no header or software emulation stands in.
extern "C" __global__ void preflight_bf16_fma(const float* a, const float* b, const float* c,
                                              float* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    unsigned short ha, hb, hc, hd;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(ha) : "f"(a[i]));
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(hb) : "f"(b[i]));
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(hc) : "f"(c[i]));
    asm("fma.rn.bf16 %0, %1, %2, %3;" : "=h"(hd) : "h"(ha), "h"(hb), "h"(hc));
    out[i] = __uint_as_float(((unsigned)hd) << 16);
}
