"""Micro-benchmark of the core simulator: ``python -m cann.sim.bench [N] [--distinct]``.

Runs a conv-like mixed instruction stream (GM->L1 burst copy, img2col, load2d, mmad, L0C->UB,
per-channel bias add with a rep-stride-0 operand, relu, UB->GM copy, flags) ``N`` times and prints
instructions per second and microseconds per instruction. ``--distinct`` makes every tile's vector
instructions distinct (no hits in the simulator's per-instruction plan cache).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from cann.hw import isa
from cann.hw.config import load_soc
from cann.sim.core import AICore

P = isa.Pipe


def conv_tile_program(tag: float = 0.5) -> list[isa.Instr]:
    """One tile of a 3x3 conv (c_in 32 = 2 x C0, 14x14 map, 64 output channels), fp16.

    ``tag`` is the scalar of the vector instructions (unused by vadd/vrelu): distinct tags make
    every tile's vector instructions distinct, defeating the simulator's per-instruction plan cache.
    """
    m, k, n = 64, 288, 64
    return [
        isa.make("copy_gm_to_l1", dst=0, src_arg=0, src=0, nburst=2, burst=14 * 14 * 32, src_stride=14 * 14 * 32,
                 dst_stride=14 * 14 * 32),
        isa.make("copy_gm_to_l1", dst=65536, src_arg=1, src=0, nburst=1, burst=k * n * 2),
        isa.make("set_flag", src_pipe=P.MTE2, dst_pipe=P.MTE1, event=0),
        isa.make("wait_flag", src_pipe=P.MTE2, dst_pipe=P.MTE1, event=0),
        isa.make("img2col", dtype=0, dst=0, src=0, fm_c1=2, fm_h=14, fm_w=14, pad_t=1, pad_b=1, pad_l=1, pad_r=1,
                 stride_h=1, stride_w=1, kernel_h=3, kernel_w=3, dil_h=1, dil_w=1, m_start=64, m_count=m,
                 k_start=0, k_count=k, fm_c1_stride=14 * 14 * 16 * 2),
        isa.make("load2d", dst_space=2, dst=0, src=65536, repeat=k * n * 2 // 512, src_stride=512, dst_stride=512),
        isa.make("set_flag", src_pipe=P.MTE1, dst_pipe=P.M, event=0),
        isa.make("wait_flag", src_pipe=P.MTE1, dst_pipe=P.M, event=0),
        isa.make("mmad", dtype=0, dst=0, a=0, b=0, m=m, k=k, n=n, init=1),
        isa.make("set_flag", src_pipe=P.M, dst_pipe=P.V, event=0),
        isa.make("wait_flag", src_pipe=P.M, dst_pipe=P.V, event=0),
        isa.make("copy_l0c_to_ub", dtype=0, dst=0, src=0, n1=n // 16, m=m, src_m=m),
        isa.make("copy_gm_to_ub", dst=65536, src_arg=2, src=0, nburst=1, burst=n * 2),
        isa.make("set_flag", src_pipe=P.MTE2, dst_pipe=P.V, event=0),
        isa.make("wait_flag", src_pipe=P.MTE2, dst_pipe=P.V, event=0),
        *[isa.make("vadd", dtype=0, dst=j * m * 32, src0=j * m * 32, src1=65536 + j * 32, repeat=m * 16 // 128,
                   mask=128, dst_blk=1, src0_blk=1, src1_blk=0, dst_rep=8, src0_rep=8, src1_rep=0, scalar=tag)
          for j in range(n // 16)],
        isa.make("vrelu", dtype=0, dst=0, src0=0, repeat=m * n // 128, mask=128, dst_blk=1, src0_blk=1, dst_rep=8,
                 src0_rep=8, scalar=tag),
        isa.make("vmuls", dtype=0, dst=0, src0=0, repeat=m * n // 128, mask=100, dst_blk=1, src0_blk=1, dst_rep=8,
                 src0_rep=8, scalar=tag),
        isa.make("set_flag", src_pipe=P.V, dst_pipe=P.MTE3, event=0),
        isa.make("wait_flag", src_pipe=P.V, dst_pipe=P.MTE3, event=0),
        isa.make("copy_ub_to_gm", dst_arg=3, dst=0, src=0, nburst=n // 16, burst=m * 32, src_stride=m * 32,
                 dst_stride=m * 32 * 2),
        isa.make("pipe_barrier", pipe=P.ALL),
    ]


def main(argv: list[str]) -> None:
    distinct = "--distinct" in argv
    argv = [a for a in argv if a != "--distinct"]
    reps = int(argv[0]) if argv else 2000
    core = AICore(load_soc("Ascend910"))
    gm = np.zeros(1 << 20, np.uint8)
    gm[:] = np.random.default_rng(0).uniform(-1, 1, gm.size // 2).astype(np.float16).view(np.uint8)
    prog = [i for r in range(reps) for i in conv_tile_program(0.5 + r * 2**-10)] if distinct else \
        conv_tile_program() * reps
    args = (0, 32768, 200000, 400000)
    t = time.perf_counter()
    st = core.run(prog, gm, args, "bench")
    dt = time.perf_counter() - t
    print(f"{st.instructions} instructions in {dt:.3f} s: {st.instructions / dt:,.0f} instr/s, "
          f"{dt / st.instructions * 1e6:.1f} us/instr; {st.cycles} modeled cycles")


if __name__ == "__main__":
    main(sys.argv[1:])
