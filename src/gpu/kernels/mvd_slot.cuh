// mvd_slot.cuh: persist.cu's decode product variant SLOT: mvd.cu in namespace mv<SLOT>, with
// the parameters packed into PV<SLOT> (QT | NR << 8 | KS << 12 | GLU << 16 | AL << 17), PNW
// warps a block, converting its own activation (XC). Included once per slot (no include guard).
#if SLOT < PNV
namespace PCAT(mv, SLOT) {
#define PVS PCAT(PV, SLOT)
#define QT ((PVS) & 255)
#define NR (((PVS) >> 8) & 15)
#define U (4 / NR)
#define KS (((PVS) >> 12) & 15)
#define GLU (((PVS) >> 16) & 1)
#define AL (((PVS) >> 17) & 1)
#define NW PNW
#define XC 1
#define MB 1
#define XNL 8
#include "mvd.cu"
#undef PVS
} // namespace
#endif
