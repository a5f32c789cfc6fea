"""ONNX operators written with existing kernels (cann/frontend/onnx_spatial.py, onnx_rearrange.py):
1-D / 3-D pooling and convolution, LpPool, Resize by per-axis matrices (cubic, antialias,
tf_crop_and_resize), Gemm transA, DepthToSpace / SpaceToDepth, Tile, CenterCropPad, Trilu,
CumSum, Einsum, GatherElements. Compiled, run on the simulator, compared with
``onnx.reference.ReferenceEvaluator`` (or numpy)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import cann
from cann.errors import CannError

MODES = {"force_fp16": 1e-2, "must_keep_origin_dtype": 1e-4}
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def _model(node, inputs, out_type=F, inits=None, opset=22):
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(node.output[0], out_type, None)],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    return onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]))


def _rel_l2(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def _check(model, feeds, mode="must_keep_origin_dtype", ref=None):
    ref = ref if ref is not None else ReferenceEvaluator(model).run(None, feeds)[0]
    out = cann.compile(model, precision_mode=mode).run(feeds)[model.graph.output[0].name]
    assert out.shape == ref.shape
    if ref.dtype.kind in "iub":
        np.testing.assert_array_equal(out, ref)
    else:
        assert np.isfinite(out).all()
        err = _rel_l2(out, ref)
        assert err <= MODES[mode], f"rel L2 {err:.3g}"
    return out


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


# ---------------------------------------------------------------------------------------------
# pooling, LpPool, Conv / ConvTranspose of other ranks


def _explicit_pads(attrs, spatial):
    """auto_pad SAME_* as explicit pads (the reference evaluator fails on some SAME pools)."""
    attrs = dict(attrs)
    auto = attrs.pop("auto_pad", "NOTSET")
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        return attrs | ({"auto_pad": auto} if auto != "NOTSET" else {})
    n = len(spatial)
    ks, st = attrs["kernel_shape"], attrs.get("strides", [1] * n)
    dil = attrs.get("dilations", [1] * n)
    pads = [0] * (2 * n)
    for i in range(n):
        out = -(-spatial[i] // st[i])
        total = max(0, (out - 1) * st[i] + (ks[i] - 1) * dil[i] + 1 - spatial[i])
        lo, hi = total // 2, total - total // 2
        pads[i], pads[i + n] = (lo, hi) if auto == "SAME_UPPER" else (hi, lo)
    return attrs | {"pads": pads}


def _np_pool(op, x, attrs, out_sp, cip=0):
    """numpy pooling over every spatial axis (explicit pads; windows past the padded input ignored)."""
    n = x.ndim - 2
    ks, st = attrs["kernel_shape"], attrs.get("strides", [1] * n)
    dil, pads = attrs.get("dilations", [1] * n), attrs.get("pads", [0] * (2 * n))
    big = [pads[i] + x.shape[2 + i] + pads[i + n] + st[i] * out_sp[i] + ks[i] * dil[i] for i in range(n)]
    xp = np.full(x.shape[:2] + tuple(big), np.nan)
    if op == "AveragePool" and cip:
        xp[(slice(None), slice(None), *[slice(0, pads[i] + x.shape[2 + i] + pads[i + n]) for i in range(n)])] = 0
    xp[(slice(None), slice(None), *[slice(pads[i], pads[i] + x.shape[2 + i]) for i in range(n)])] = x
    y = np.zeros(x.shape[:2] + tuple(out_sp))
    for o in np.ndindex(*out_sp):
        win = xp[(slice(None), slice(None), *[slice(o[i] * st[i], o[i] * st[i] + (ks[i] - 1) * dil[i] + 1, dil[i])
                                              for i in range(n)])].reshape(x.shape[0], x.shape[1], -1)
        y[(slice(None), slice(None), *o)] = np.nanmax(win, -1) if op == "MaxPool" else np.nanmean(win, -1)
    return y.astype(np.float32)


def _np_conv_transpose_1d(x, w, b, attrs, out_len):
    s, d = attrs.get("strides", [1])[0], attrs.get("dilations", [1])[0]
    grp, begin = attrs.get("group", 1), attrs.get("pads", [0, 0])[0]
    n, c, length = x.shape
    cin, cout, k = c // grp, w.shape[1], w.shape[2]
    full = np.zeros((n, cout * grp, (length - 1) * s + (k - 1) * d + 1 + begin + out_len))
    for gi in range(grp):
        for i in range(length):
            for kk in range(k):
                full[:, gi * cout:(gi + 1) * cout, i * s + kk * d] += x[:, gi * cin:(gi + 1) * cin, i] @ w[
                    gi * cin:(gi + 1) * cin, :, kk]
    return (full[:, :, begin:begin + out_len] + b.reshape(1, -1, 1)).astype(np.float32)


def _ref_2d(op, x, attrs, inits=None):
    """Reference of a 1-D op through the 2-D op on [N, C, 1, L] (some 1-D reference kernels fail)."""
    a2 = {}
    for k, v in attrs.items():
        if k in ("kernel_shape", "strides", "dilations", "output_padding"):
            v = [1, *v]
        elif k == "pads":
            v = [0, v[0], 0, v[1]]
        elif k == "output_shape":
            v = [1, *v]
        a2[k] = v
    inits = {n: (a.reshape(a.shape[0], a.shape[1], 1, a.shape[2]) if a.ndim == 3 else a)
             for n, a in (inits or {}).items()}
    x4 = x.reshape(x.shape[0], x.shape[1], 1, x.shape[2])
    ins = ["x", *inits]
    m = _model(helper.make_node(op, ins, ["y"], **a2), [("x", F, x4.shape)], inits=inits)
    y = ReferenceEvaluator(m).run(None, {"x": x4})[0]
    return y.reshape(y.shape[0], y.shape[1], y.shape[3])


POOLS = [
    dict(kernel_shape=[3]),
    dict(kernel_shape=[3], strides=[2], pads=[1, 2], ceil_mode=1),
    dict(kernel_shape=[2], dilations=[2], pads=[1, 1]),
    dict(kernel_shape=[3], auto_pad="SAME_UPPER"),
    dict(kernel_shape=[2, 2, 2]),
    dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0], ceil_mode=1),
    dict(kernel_shape=[2, 3, 2], dilations=[2, 1, 2], pads=[1, 1, 1, 1, 1, 1]),
    dict(kernel_shape=[2, 3, 2], auto_pad="SAME_LOWER"),
]


@pytest.mark.parametrize("attrs", POOLS)
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "AveragePool1"])
def test_pool_nd(op, attrs):
    extra = {}
    if op == "AveragePool1":
        op, extra = "AveragePool", {"count_include_pad": 1}
    shape = (2, 3, 11) if len(attrs["kernel_shape"]) == 1 else (1, 3, 7, 6, 8)
    x = _x(*shape)
    m = _model(helper.make_node(op, ["x"], ["y"], **attrs, **extra), [("x", F, shape)])
    out_sp = [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim][2:]
    ref = _np_pool(op, x, _explicit_pads(attrs, shape[2:]), out_sp, extra.get("count_include_pad", 0))
    if not attrs.get("ceil_mode") and "auto_pad" not in attrs:  # the spec's reference agrees
        np.testing.assert_allclose(ref, ReferenceEvaluator(m).run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    _check(m, {"x": x}, ref=ref)


@pytest.mark.parametrize("mode", MODES)
def test_pool_3d_fp16(mode):
    x = _x(1, 2, 5, 6, 7)
    m = _model(helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3, 3], pads=[1] * 6, strides=[2, 2, 2]),
               [("x", F, x.shape)])
    _check(m, {"x": x}, mode)


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("attrs,shape", [
    (dict(kernel_shape=[3]), (1, 2, 9)),
    (dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 0, 1, 0]), (1, 3, 6, 5)),
    (dict(kernel_shape=[3, 3], dilations=[2, 1], pads=[2, 1, 1, 0]), (1, 2, 7, 7)),
    (dict(kernel_shape=[3, 2], auto_pad="SAME_UPPER", strides=[2, 1]), (1, 2, 7, 7)),
    (dict(kernel_shape=[2, 2, 2]), (1, 2, 4, 5, 3)),
])
def test_lp_pool(p, attrs, shape):
    x = _x(*shape)
    m = _model(helper.make_node("LpPool", ["x"], ["y"], p=p, **attrs), [("x", F, shape)])
    _check(m, {"x": x})


@pytest.mark.parametrize("attrs", [
    dict(),
    dict(strides=[2], pads=[1, 2]),
    dict(dilations=[2], auto_pad="SAME_LOWER"),
    dict(group=2, strides=[3]),
])
@pytest.mark.parametrize("bias", [False, True])
def test_conv_1d(attrs, bias):
    x = _x(2, 4, 13)
    w = _x(6, 4 // attrs.get("group", 1), 3, seed=1) * 0.5
    inits = {"w": w}
    ins = ["x", "w"]
    if bias:
        inits["b"] = _x(6, seed=2)
        ins.append("b")
    m = _model(helper.make_node("Conv", ins, ["y"], **attrs), [("x", F, x.shape)], inits=inits)
    _check(m, {"x": x})


@pytest.mark.parametrize("attrs", [
    dict(),
    dict(strides=[2], pads=[1, 0], output_padding=[1]),
    dict(strides=[3], dilations=[2]),
    dict(strides=[2], output_shape=[12], auto_pad="SAME_UPPER"),
    dict(group=2),
])
def test_conv_transpose_1d(attrs):
    x = _x(1, 4, 6)
    w = _x(4, 3, 3, seed=1) * 0.5
    inits = {"w": w, "b": _x(3 * attrs.get("group", 1), seed=2)}
    m = _model(helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs), [("x", F, x.shape)], inits=inits)
    if "output_shape" in attrs:
        ref = _ref_2d("ConvTranspose", x, attrs, inits)
    else:
        out_len = [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim][2]
        ref = _np_conv_transpose_1d(x, w, inits["b"], attrs, out_len)
    _check(m, {"x": x}, ref=ref)


def test_conv_1d_runtime_weight_is_rejected():
    m = _model(helper.make_node("Conv", ["x", "w"], ["y"]), [("x", F, (1, 2, 5)), ("w", F, (3, 2, 2))])
    with pytest.raises(CannError, match="non-constant W"):
        cann.compile(m)


# ---------------------------------------------------------------------------------------------
# Resize by matrices


RESIZES = [
    (dict(mode="cubic"), [1, 1, 2.0, 1.5], None),
    (dict(mode="cubic"), [1, 1, 0.6, 0.8], None),
    (dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1), [1, 1, 0.7, 1.7], None),
    (dict(mode="cubic", coordinate_transformation_mode="align_corners"), [1, 1, 1.5, 2.0], None),
    (dict(mode="cubic", coordinate_transformation_mode="asymmetric"), [1, 1, 2.0, 2.0], None),
    (dict(mode="cubic", antialias=1), [1, 1, 0.5, 0.6], None),
    (dict(mode="linear", antialias=1), [1, 1, 0.4, 0.75], None),
    (dict(mode="cubic", antialias=1, keep_aspect_ratio_policy="not_larger", axes=[2, 3]), None, [4, 5]),
    (dict(mode="cubic", coordinate_transformation_mode="pytorch_half_pixel"), None, [1, 3, 9, 1]),
    (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0),
     None, [1, 3, 5, 6]),
    (dict(mode="nearest", coordinate_transformation_mode="tf_crop_and_resize"), [1, 1, 1.5, 2.0], None),
]


@pytest.mark.parametrize("attrs,scales,sizes", RESIZES)
def test_resize_matrix(attrs, scales, sizes):
    x = _x(1, 3, 8, 7)
    inits = {"roi": np.array([0, 0, 0.1, -0.2, 1, 1, 0.8, 1.3], np.float32)
             if attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize" else np.zeros(0, np.float32)}
    ins = ["x", "roi"]
    if scales is not None:
        inits["scales"] = np.array(scales, np.float32)
        ins.append("scales")
    else:
        inits["sizes"] = np.array(sizes, np.int64)
        ins += ["", "sizes"]
    m = _model(helper.make_node("Resize", ins, ["y"], **attrs), [("x", F, x.shape)], inits=inits, opset=19)
    _check(m, {"x": x})


@pytest.mark.parametrize("mode", MODES)
def test_resize_cubic_3d_last_axis(mode):
    x = _x(2, 5, 9)
    m = _model(helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="cubic"), [("x", F, x.shape)],
               inits={"scales": np.array([1, 1, 1.7], np.float32)}, opset=19)
    _check(m, {"x": x}, mode)


def test_resize_cubic_bad_ctm_names_node():
    m = _model(helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="cubic", name="rz",
                                coordinate_transformation_mode="half_pixel_symmetric"), [("x", F, (1, 1, 4, 4))],
               inits={"scales": np.array([1, 1, 2, 2], np.float32)}, opset=18)
    with pytest.raises(CannError, match="rz.*coordinate_transformation_mode"):
        cann.compile(m)


# ---------------------------------------------------------------------------------------------
# Gemm transA, DepthToSpace / SpaceToDepth, Tile, CenterCropPad


@pytest.mark.parametrize("mode", MODES)
def test_gemm_trans_a(mode):
    a = _x(6, 4)
    m = _model(helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0),
               [("a", F, a.shape)], inits={"b": _x(5, 6, seed=1), "c": _x(5, seed=2)})
    _check(m, {"a": a}, mode)


@pytest.mark.parametrize("op,mode", [("DepthToSpace", "DCR"), ("DepthToSpace", "CRD"), ("SpaceToDepth", "DCR"),
                                     ("SpaceToDepth", "CRD")])
def test_depth_space(op, mode):
    shape = (2, 8, 3, 2) if op == "DepthToSpace" else (2, 3, 4, 6)
    x = _x(*shape)
    kw = {"mode": mode} if op == "DepthToSpace" or mode != "DCR" else {}
    m = _model(helper.make_node(op, ["x"], ["y"], blocksize=2, **kw), [("x", F, shape)], opset=28)
    _check(m, {"x": x})


def test_depth_to_space_bad_mode_names_node():
    m = _model(helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="XYZ", name="d2s"),
               [("x", F, (1, 4, 2, 2))], opset=13)
    with pytest.raises(CannError, match="d2s.*mode"):
        cann.compile(m)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_tile(dtype):
    x = (_x(2, 3, 4) * 10).astype(dtype)
    m = _model(helper.make_node("Tile", ["x", "r"], ["y"]), [("x", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                                                x.shape)],
               out_type=helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), inits={"r": np.array([2, 1, 3], np.int64)})
    _check(m, {"x": x})


@pytest.mark.parametrize("shape,axes", [([4, 9], [1, 2]), ([7, 3, 2], None), ([2], [-2])])
def test_center_crop_pad(shape, axes):
    x = _x(3, 6, 5)
    kw = {"axes": axes} if axes else {}
    m = _model(helper.make_node("CenterCropPad", ["x", "s"], ["y"], **kw), [("x", F, x.shape)],
               inits={"s": np.array(shape, np.int64)}, opset=18)
    _check(m, {"x": x})


# ---------------------------------------------------------------------------------------------
# Trilu, CumSum


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-2, 0, 1, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_trilu(upper, k, dtype):
    x = (_x(2, 4, 5) * 100).astype(dtype)
    tt = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = _model(helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper), [("x", tt, x.shape)], out_type=tt,
               inits={"k": np.array(k, np.int64)}, opset=14)
    _check(m, {"x": x})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("axis,exclusive,reverse", [(0, 0, 0), (1, 1, 0), (-1, 0, 1), (2, 1, 1)])
def test_cumsum(mode, axis, exclusive, reverse):
    x = _x(3, 4, 6)
    m = _model(helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=exclusive, reverse=reverse),
               [("x", F, x.shape)], inits={"a": np.array(axis, np.int64)}, opset=14)
    _check(m, {"x": x}, mode)


# ---------------------------------------------------------------------------------------------
# Einsum


EINSUMS = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("bii->bi", [(3, 5, 5)]),
    ("i,i", [(6,), (6,)]),
    ("ij->", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ijk,ik->j", [(3, 4, 5), (3, 5)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUMS)
def test_einsum(eq, shapes):
    xs = {f"x{i}": _x(*s, seed=i) for i, s in enumerate(shapes)}
    m = _model(helper.make_node("Einsum", list(xs), ["y"], equation=eq), [(n, F, v.shape) for n, v in xs.items()],
               opset=12)
    _check(m, xs, ref=np.einsum(eq, *xs.values()).astype(np.float32))


@pytest.mark.parametrize("mode", MODES)
def test_einsum_fp16(mode):
    xs = {"a": _x(2, 3, 4), "b": _x(2, 4, 5, seed=1)}
    m = _model(helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bki"),
               [(n, F, v.shape) for n, v in xs.items()], opset=12)
    _check(m, xs, mode)


# ---------------------------------------------------------------------------------------------
# GatherElements


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("const", [True, False])
def test_gather_elements(axis, const):
    x = _x(3, 4, 5)
    r = np.random.default_rng(3)
    ishape = list(x.shape)
    ishape[axis] = 6
    n = x.shape[axis]
    idx = r.integers(-n, n, size=ishape).astype(np.int64)
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)
    if const:
        m = _model(node, [("x", F, x.shape)], inits={"i": idx}, opset=13)
        feeds = {"x": x}
    else:
        m = _model(node, [("x", F, x.shape), ("i", I64, idx.shape)], opset=13)
        feeds = {"x": x, "i": idx}
    _check(m, feeds)


def test_gather_elements_const_out_of_range_names_node():
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0, name="ge")
    m = _model(node, [("x", F, (2, 2))], inits={"i": np.array([[0, 2]], np.int64)}, opset=13)
    with pytest.raises(CannError, match="ge.*out of range"):
        cann.compile(m)


# ---------------------------------------------------------------------------------------------
# constant-index data movement: GatherND, ReverseSequence, Compress, Scatter*, TensorScatter, Col2Im


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("idx,batch_dims", [
    (np.array([[0, 1], [2, -1]]), 0),
    (np.array([[1], [0]]), 0),
    (np.array([[[0, 1, 2]], [[2, 0, 3]]]), 0),
    (np.array([[1], [2], [0]]), 1),
])
def test_gather_nd(dtype, idx, batch_dims):
    x = (_x(3, 3, 4) * 10).astype(dtype)
    tt = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = _model(helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims), [("x", tt, x.shape)],
               out_type=tt, inits={"i": idx.astype(np.int64)}, opset=13)
    _check(m, {"x": x})


@pytest.mark.parametrize("batch_axis,time_axis", [(0, 1), (1, 0)])
def test_reverse_sequence(batch_axis, time_axis):
    x = _x(4, 4, 3)
    m = _model(helper.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=batch_axis, time_axis=time_axis),
               [("x", F, x.shape)], inits={"l": np.array([4, 1, 0, 3], np.int64)}, opset=10)
    _check(m, {"x": x})


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress(axis):
    x = _x(3, 4)
    kw = {} if axis is None else {"axis": axis}
    m = _model(helper.make_node("Compress", ["x", "c"], ["y"], **kw), [("x", F, x.shape)],
               inits={"c": np.array([True, False, True, True][: 3 if axis == 0 else 4])}, opset=11)
    _check(m, {"x": x})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_elements(reduction, axis):
    x, u = _x(3, 4), _x(2, 4, seed=1)
    idx = np.array([[0, 2, 1, -1], [0, 2, 0, 1]], np.int64)  # duplicates
    if axis == 1:
        u, idx = u[:, :3].T.copy(), np.array([[0, 3], [3, 3], [-1, 0]], np.int64)
    m = _model(helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=axis, reduction=reduction),
               [("x", F, x.shape), ("u", F, u.shape)], inits={"i": idx}, opset=18)
    _check(m, {"x": x, "u": u})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("idx,ushape", [(np.array([[1], [0], [1]]), (3, 4, 5)), (np.array([[2, 3], [0, 0]]), (2, 5))])
def test_scatter_nd(reduction, idx, ushape):
    if reduction == "none" and len(np.unique(idx, axis=0)) != len(idx):
        idx = idx[1:]
        ushape = (len(idx),) + ushape[1:]
    x, u = _x(3, 4, 5), _x(*ushape, seed=1)
    m = _model(helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction),
               [("x", F, x.shape), ("u", F, u.shape)], inits={"i": idx.astype(np.int64)}, opset=18)
    _check(m, {"x": x, "u": u})


def test_scatter_elements_int_data_none():
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    u = -np.arange(4, dtype=np.int64).reshape(1, 4)
    m = _model(helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0), [("x", I64, x.shape),
                                                                                     ("u", I64, u.shape)],
               out_type=I64, inits={"i": np.array([[2, 0, 1, 2]], np.int64)}, opset=18)
    _check(m, {"x": x, "u": u})


@pytest.mark.parametrize("mode,wi", [("linear", [0, 2]), ("circular", [3, 5])])
def test_tensor_scatter(mode, wi):
    c, u = _x(2, 3, 6, 4), _x(2, 3, 2, 4, seed=1)
    m = _model(helper.make_node("TensorScatter", ["c", "u", "w"], ["y"], mode=mode),
               [("c", F, c.shape), ("u", F, u.shape)], inits={"w": np.array(wi, np.int64)}, opset=24)
    _check(m, {"c": c, "u": u})


@pytest.mark.parametrize("attrs", [dict(), dict(strides=[2, 1]), dict(pads=[1, 0, 1, 2], dilations=[1, 2])])
def test_col2im(attrs):
    img, blk = [5, 6], [2, 3]
    n = 2
    st, pd, dl = attrs.get("strides", [1, 1]), attrs.get("pads", [0] * 4), attrs.get("dilations", [1, 1])
    o = [(img[i] + pd[i] + pd[i + 2] - (blk[i] - 1) * dl[i] - 1) // st[i] + 1 for i in range(2)]
    x = _x(1, n * 6, o[0] * o[1])
    m = _model(helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], **attrs), [("x", F, x.shape)],
               inits={"img": np.array(img, np.int64), "blk": np.array(blk, np.int64)}, opset=18)
    _check(m, {"x": x})


# ---------------------------------------------------------------------------------------------
# NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (constant targets)


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weight", [None, "const", "runtime"])
@pytest.mark.parametrize("ii", [None, 1, -1])
def test_losses(op, reduction, weight, ii):
    x = _x(3, 4, 2, 5)
    r = np.random.default_rng(5)
    t = r.integers(0, 4, size=(3, 2, 5)).astype(np.int64)
    if ii is not None:
        t[0, 0, :3] = ii
    kw = {"reduction": reduction} | ({} if ii is None else {"ignore_index": ii})
    ins, inputs, inits, feeds = ["x", "t"], [("x", F, x.shape)], {"t": t}, {"x": x}
    w = np.abs(_x(4, seed=2)) + 0.5
    if weight == "const":
        ins.append("w")
        inits["w"] = w
    elif weight == "runtime":
        ins.append("w")
        inputs.append(("w", F, (4,)))
        feeds["w"] = w
    m = _model(helper.make_node(op, ins, ["y"], **kw), inputs, inits=inits, opset=13)
    _check(m, feeds)


def test_sce_log_prob_output():
    x = _x(4, 5)
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y", "lp"], reduction="mean")
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", F, x.shape)],
                          [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("lp", F, None)],
                          [numpy_helper.from_array(np.array([0, 4, 2, 1], np.int64), "t")])
    m = onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    ref = ReferenceEvaluator(m).run(None, {"x": x})
    out = cann.compile(m, precision_mode="must_keep_origin_dtype").run({"x": x})
    assert _rel_l2(out["y"], ref[0]) < 1e-5 and _rel_l2(out["lp"], ref[1]) < 1e-5


def test_loss_runtime_target():
    """Runtime targets: either the operator's function body (GatherElements on the device) or an
    error naming the node and the target input, never wrong numbers."""
    m = _model(helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], name="nll", reduction="sum"),
               [("x", F, (2, 3)), ("t", I64, (2,))], opset=13)
    try:
        cm = cann.compile(m, precision_mode="must_keep_origin_dtype")
    except CannError as e:
        assert "nll" in str(e) and "target" in str(e)
        return
    x, t = _x(2, 3), np.array([2, 0], np.int64)
    np.testing.assert_allclose(cm.run({"x": x, "t": t})["y"], -(x[0, 2] + x[1, 0]), rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# 3-D Conv / ConvTranspose, 3-D Col2Im


CONV3D = [
    dict(),
    dict(strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1]),
    dict(dilations=[2, 1, 1], pads=[1, 1, 1, 1, 1, 1]),
    dict(group=2, strides=[1, 2, 1]),
    dict(auto_pad="SAME_UPPER", strides=[2, 2, 2]),
]


@pytest.mark.parametrize("attrs", CONV3D)
def test_conv_3d(attrs):
    x = _x(1, 4, 5, 6, 5)
    w = _x(6, 4 // attrs.get("group", 1), 3, 2, 3, seed=1) * 0.3
    m = _model(helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs), [("x", F, x.shape)],
               inits={"w": w, "b": _x(6, seed=2)})
    _check(m, {"x": x})


@pytest.mark.parametrize("attrs", [
    dict(),
    dict(strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 0], output_padding=[1, 0, 1]),
    dict(dilations=[2, 1, 2], strides=[1, 2, 1]),
    dict(group=2, strides=[3, 1, 1]),
    dict(strides=[2, 2, 2], output_shape=[8, 6, 8], auto_pad="SAME_LOWER"),
])
def test_conv_transpose_3d(attrs):
    x = _x(1, 4, 4, 3, 4)
    w = _x(4, 3, 3, 2, 3, seed=1) * 0.3
    b = _x(3 * attrs.get("group", 1), seed=2)
    m = _model(helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs), [("x", F, x.shape)],
               inits={"w": w, "b": b})
    ref = None
    if attrs.get("group", 1) > 1:  # the reference evaluator fails on grouped 3-D: one group at a time
        a1 = {k: v for k, v in attrs.items() if k != "group"}
        parts = []
        for gi in range(2):
            mg = _model(helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **a1), [("x", F, (1, 2, 4, 3, 4))],
                        inits={"w": w[2 * gi:2 * gi + 2], "b": b[3 * gi:3 * gi + 3]})
            parts.append(ReferenceEvaluator(mg).run(None, {"x": x[:, 2 * gi:2 * gi + 2]})[0])
        ref = np.concatenate(parts, 1)
    _check(m, {"x": x}, ref=ref)


def test_col2im_3d():
    img, blk = [4, 5, 3], [2, 2, 2]
    x = _x(1, 2 * 8, 3 * 4 * 2)
    m = _model(helper.make_node("Col2Im", ["x", "img", "blk"], ["y"]), [("x", F, x.shape)],
               inits={"img": np.array(img, np.int64), "blk": np.array(blk, np.int64)}, opset=18)
    _check(m, {"x": x})


# ---------------------------------------------------------------------------------------------
# DFT, STFT


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("c,inverse,onesided,length", [
    (1, 0, 0, None), (2, 0, 0, None), (1, 0, 1, None), (2, 1, 0, None), (2, 1, 1, None), (1, 0, 0, 12),
    (2, 0, 0, 6),
])
def test_dft(opset, c, inverse, onesided, length):
    n = 5 if inverse and onesided else 8
    x = _x(2, n, 3, c)
    inits, ins = {}, ["x"]
    ins.append("l" if length else "")
    if length:
        inits["l"] = np.array(length, np.int64)
    kw = dict(inverse=inverse, onesided=onesided)
    if opset >= 20:
        ins.append("a")
        inits["a"] = np.array(1, np.int64)
    else:
        kw["axis"] = 1
    m = _model(helper.make_node("DFT", ins, ["y"], **kw), [("x", F, x.shape)], inits=inits, opset=opset)
    out = cann.compile(m, precision_mode="must_keep_origin_dtype").run({"x": x})["y"]
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("window", [False, True])
@pytest.mark.parametrize("onesided", [0, 1])
def test_stft(window, onesided):
    x = _x(2, 40, 1)
    inits = {"s": np.array(6, np.int64), "l": np.array(10, np.int64)}
    if window:
        inits["w"] = np.hanning(10).astype(np.float32)
    m = _model(helper.make_node("STFT", ["x", "s", "w" if window else "", "l"], ["y"], onesided=onesided),
               [("x", F, x.shape)], inits=inits, opset=17)
    _check(m, {"x": x})


# ---------------------------------------------------------------------------------------------
# AffineGrid, MaxUnpool


@pytest.mark.parametrize("size", [[2, 3, 4, 5], [1, 2, 3, 4, 5], [2, 1, 1, 6]])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid(size, align_corners):
    r = len(size) - 2
    theta = _x(size[0], r, r + 1)
    m = _model(helper.make_node("AffineGrid", ["t", "s"], ["y"], align_corners=align_corners),
               [("t", F, theta.shape)], inits={"s": np.array(size, np.int64)}, opset=20)
    _check(m, {"t": theta})


@pytest.mark.parametrize("out_shape", [None, [1, 2, 6, 7]])
def test_max_unpool(out_shape):
    x = _x(1, 2, 2, 3)
    # positions of a 2x2 / stride 2 max pool over a 1x2x4x6 input (one per window)
    r = np.random.default_rng(1)
    idx = np.zeros((1, 2, 2, 3), np.int64)
    for c in range(2):
        for i in range(2):
            for j in range(3):
                idx[0, c, i, j] = c * 24 + (2 * i + r.integers(2)) * 6 + 2 * j + r.integers(2)
    ins = ["x", "i"] + (["o"] if out_shape else [])
    inits = {"i": idx} | ({"o": np.array(out_shape, np.int64)} if out_shape else {})
    m = _model(helper.make_node("MaxUnpool", ins, ["y"], kernel_shape=[2, 2], strides=[2, 2]), [("x", F, x.shape)],
               inits=inits, opset=11)
    if out_shape:  # shape inference leaves the output shape open with an output_shape input
        m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", F, out_shape))
    _check(m, {"x": x})
