// A bad compile option given as a pass option is reported under the pass and the option's name
// (issue 10, item 20), checked by the same table as cann-compile's flags (cann/options.py); an
// option left at its default (convert-tile-to-ascend's soc) is not checked.
// RUN: not cann-opt %s -p 'convert-graph-to-tile{soc=Ascend999}' 2>&1 | filecheck %s --check-prefix=SOC
// RUN: not cann-opt %s -p 'convert-graph-to-tile{precision_mode=fp8 aicore_num=64}' 2>&1 | filecheck %s --check-prefix=TWO
// RUN: not cann-opt %s -p 'convert-graph-to-tile{soc=Ascend310 aicore_num=4}' 2>&1 | filecheck %s --check-prefix=CORES
// RUN: cann-opt %s -p 'convert-tile-to-ascend' | filecheck %s --check-prefix=OK
// --help lists cann's passes with their options and defaults, and no xDSL pass for other dialects.
// RUN: cann-opt --help | filecheck %s --check-prefix=HELP

// SOC:        error: convert-graph-to-tile: bad pass option soc=Ascend999: unknown SoC 'Ascend999' (known: Ascend310, Ascend910, Ascend910B1)
// SOC-NOT:    --soc_version
// TWO:        error: convert-graph-to-tile: bad pass option precision_mode=fp8: unknown precision mode 'fp8' (known: force_fp16, allow_fp32_to_fp16, must_keep_origin_dtype, force_fp32, allow_mix_precision)
// TWO-NEXT:   error: convert-graph-to-tile: bad pass option aicore_num=64: 64 cores requested; Ascend910 has 32
// CORES:      error: convert-graph-to-tile: bad pass option aicore_num=4: 4 cores requested; Ascend310 has 2
// OK:         builtin.module

// HELP:       cann passes (options in braces, shown with their defaults):
// HELP:         convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling='' aicore_num=0 buffers=1}
// HELP:         graph-fuse-ub{cube_epilogue=true elementwise=true reduction=true max_ops=8 ub_bytes={{[0-9]+}}}
// HELP:         graph-recompose{layer_norm=true gelu=true}
// HELP:       xDSL passes that apply to any IR: canonicalize, cse, dce
// HELP-NOT:   convert-linalg-to-loops
builtin.module {
}
