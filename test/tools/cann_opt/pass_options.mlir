// A bad compile option given as a pass option is reported under the pass and the option's name
// (issue 10, item 20), checked by the same table as cann-compile's flags (cann/options.py); an
// option left at its default (convert-tile-to-ascend's soc) is not checked.
// RUN: not cann-opt %s -p 'convert-graph-to-tile{soc=Ascend999}' 2>&1 | filecheck %s --check-prefix=SOC
// RUN: not cann-opt %s -p 'convert-graph-to-tile{precision_mode=fp8 aicore_num=64}' 2>&1 | filecheck %s --check-prefix=TWO
// RUN: not cann-opt %s -p 'convert-graph-to-tile{soc=Ascend310 aicore_num=4}' 2>&1 | filecheck %s --check-prefix=CORES
// RUN: cann-opt %s -p 'convert-tile-to-ascend' | filecheck %s --check-prefix=OK
// A pass's own options: named with the value and the kind expected, not xDSL's Python classes;
// graph-fuse-ub's bounds are checked (a group of no ops, a UB of no bytes).
// RUN: not cann-opt %s -p 'graph-fuse-ub{elementwise=maybe}' 2>&1 | filecheck %s --check-prefix=BOOL
// RUN: not cann-opt %s -p 'graph-fuse-ub{ub_bytes=1.5}' 2>&1 | filecheck %s --check-prefix=INT
// RUN: not cann-opt %s -p 'graph-fuse-ub{nosuch=1}' 2>&1 | filecheck %s --check-prefix=NAME
// RUN: not cann-opt %s -p 'graph-fuse-ub{max_ops=0}' 2>&1 | filecheck %s --check-prefix=MAXOPS
// RUN: not cann-opt %s -p 'graph-fuse-ub{ub_bytes=-1}' 2>&1 | filecheck %s --check-prefix=UBBYTES
// RUN: not cann-opt %s -p 'graph-fuse-ub{soc=Ascend999}' 2>&1 | filecheck %s --check-prefix=FUSESOC
// --help lists cann's passes with their options and defaults, and no xDSL pass for other dialects.
// RUN: cann-opt --help | filecheck %s --check-prefix=HELP

// SOC:        error: convert-graph-to-tile: bad pass option soc=Ascend999: unknown SoC 'Ascend999' (known: Ascend310, Ascend910, Ascend910B1)
// SOC-NOT:    --soc_version
// TWO:        error: convert-graph-to-tile: bad pass option precision_mode=fp8: unknown precision mode 'fp8' (known: force_fp16, allow_fp32_to_fp16, must_keep_origin_dtype, force_fp32, allow_mix_precision)
// TWO-NEXT:   error: convert-graph-to-tile: bad pass option aicore_num=64: 64 cores requested; Ascend910 has 32
// CORES:      error: convert-graph-to-tile: bad pass option aicore_num=4: 4 cores requested; Ascend310 has 2
// OK:         builtin.module
// BOOL:       error: graph-fuse-ub: bad pass option elementwise=maybe: expected true or false
// INT:        error: graph-fuse-ub: bad pass option ub_bytes=1.5: expected an integer
// NAME:       error: graph-fuse-ub: bad pass option nosuch: no such option (options: cube_epilogue, elementwise, reduction, max_ops, ub_bytes, soc)
// MAXOPS:     error: graph-fuse-ub: bad pass option max_ops=0: the largest group in ops, at least 1 (1: no fusion)
// UBBYTES:    error: graph-fuse-ub: bad pass option ub_bytes=-1: the UB budget in bytes, at least 1 (0: the SoC's UB)
// FUSESOC:    error: graph-fuse-ub: bad pass option soc=Ascend999: unknown SoC 'Ascend999' (known: Ascend310, Ascend910, Ascend910B1)

// HELP:       cann passes (options in braces, shown with their defaults):
// HELP:         convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling='' aicore_num=0 buffers=1}
// HELP:         convert-tile-to-ascend{soc}{{$}}
// HELP:         ascend-insert-sync{mode=barrier free_barriers=true}
// HELP-NEXT:        Insert synchronisation between pipes into every `ascend.kernel`: a `pipe_barrier` at every pipe change (`mode=barrier`) or set_flag / wait_flag pairs for the cross-pipe dependences only (`mode=flags`).{{$}}
// HELP:         graph-fuse-ub{cube_epilogue=true elementwise=true reduction=true max_ops=8 ub_bytes=0 soc=Ascend910}
// HELP-NEXT:        Form `graph.fused` groups, each lowered to one kernel whose intermediates stay in UB: {{.*}} last-axis Softmax.{{$}}
// HELP:         graph-recompose{layer_norm=true gelu=true}
// HELP:         graph-spatial-partition{grid=1x1 depth=1}
// HELP-NEXT:        Split the model's image over a `grid` of `RxC` devices {{.*}} every `depth` window layers (at least 1).{{$}}
// HELP:       xDSL passes that apply to any IR: canonicalize, cse, dce
// HELP-NOT:   convert-linalg-to-loops
builtin.module {
}
