"""Adaptive gradient splitting (issue 16 item 4): every strategy's simulated iteration time and communication tail.

    python benchmarks/gradient_split.py [--cache /tmp/gsplit_probes.json] [--batch 32] [--bert-batch 8]

Networks (built here with onnx.helper; fp32 gradients of 4 bytes per parameter, backward kernels compiled with
``force_fp16`` as mixed-precision training runs them):

* **ResNet-50** (torchvision v1.5 layout: stride in the 3x3 convolution), ``--batch`` images per device (32), 161
  gradients (53 convolutions, 53 BatchNorms' scale and bias, the fc layer's weight and bias), 25.6 M parameters.
* **A BERT-base-sized encoder**: word (30522), position (512) and token-type embeddings with LayerNorm, 12 layers of
  hidden 768, 12 heads, FFN 3072 (GELU), post-LayerNorm; ``--bert-batch`` sequences of 128 tokens per device.

The whole training step of these networks at these batches is beyond what the simulator runs per step here, so
each **distinct layer shape is simulated once at the device batch** (``cann.training.grad_profile.time_program``,
timing-only: a convolution + BatchNorm (+ ReLU) unit; one encoder layer; the embedding unit; the fc layer), with
its input an initializer trained as a parameter so that its backward computes the input's gradient as it does
inside the network (except the first layer's). The network's step profile is then composed: forward time the sum
of its layers' forward times; backward kernels the layers' backward kernels in reverse layer order, each gradient
produced where its layer's probe produced it; each probe's own loss (MSE on its output) stands in for the
incoming gradient (its backward pass is one elementwise pass over the layer's output, counted: an overestimate of
a few percent). The residual additions' backward (a copy of the incoming gradient) is not counted. The optimizer
update is a simulated ONNX Momentum update of every parameter (fp32).

Link models (cann/hw/clusters/Atlas800.toml, :class:`cann.training.step_sim.CommModel`): ``server`` -- the ring
over all devices at the ring's slowest link (one 8-device Atlas 800 server: PCIe between its two HCCS groups;
beyond a server, RoCE); ``multi`` -- hierarchical (reduce-scatter inside each server, rings over the servers'
RoCE ports, all-gather inside each server). At 8 devices both are one server's ring.

The simulated backward kernels are far slower than hardware (the im2col-matmul rewrite of training convolutions,
docs/training.md), so communication hides behind them almost entirely; a second ResNet-50 table scales the
simulated forward and backward times to MindInsight's published 8-device step (23.6 ms with a 6.15 ms tail,
scale-out.md §1.1 [G7]: 17.45 ms of compute), keeping each kernel's share, to show the strategies where
communication matters.

Every strategy is scored by the event-level step simulation (:func:`cann.training.step_sim.simulate`) only.
Times in milliseconds of simulated time; ``segs``: the number of segments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cann.training import grad_split  # noqa: E402
from cann.training.grad_profile import LayerTiming, time_program, update_seconds  # noqa: E402
from cann.training.step_sim import CommModel, StepProfile, simulate  # noqa: E402

OPSET = [helper.make_opsetid("", 18)]
CONFIGS = [(8, "server"), (64, "server"), (64, "multi"), (512, "server"), (512, "multi")]
KIND = {"server": "ring", "multi": "hierarchical"}


def _init(rng, name, shape, scale=0.05):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def conv_unit(n, c, h, k, co, s, relu, input_grad):
    """Conv k x k / s (pad k // 2) + BatchNorm (+ ReLU) on an n x c x h x h input; with ``input_grad`` a trained
    initializer ``x`` of the input's shape is added to the input (its gradient is the layer's input gradient)."""
    rng = np.random.default_rng(0)
    ho = (h + 2 * (k // 2) - k) // s + 1
    inits = [_init(rng, "w", (co, c, k, k)), numpy_helper.from_array(np.ones(co, np.float32), "g"),
             numpy_helper.from_array(np.zeros(co, np.float32), "b"),
             numpy_helper.from_array(np.zeros(co, np.float32), "m"), numpy_helper.from_array(np.ones(co, np.float32), "v")]
    inputs = [helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [n, c, h, h])]
    inits.append(_init(rng, "x", (n, c, h, h), 1.0))
    nodes = [helper.make_node("Add", ["x_in", "x"], ["xa"]) if input_grad else helper.make_node("Identity", ["x_in"], ["xa"]),
             helper.make_node("Conv", ["xa", "w"], ["c"], kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4),
             helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["bn" if relu else "y"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["bn"], ["y"]))
    if not input_grad:
        inits.pop()
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, co, ho, ho])
    return helper.make_model(helper.make_graph(nodes, "unit", inputs, [out], inits), opset_imports=OPSET), \
        (["x"] if input_grad else []) + ["w", "g", "b"]


def fc_unit(n, c, classes):
    rng = np.random.default_rng(0)
    inits = [_init(rng, "x", (n, c), 1.0), _init(rng, "w", (c, classes)), _init(rng, "bias", (classes,))]
    nodes = [helper.make_node("Add", ["x_in", "x"], ["xa"]),
             helper.make_node("MatMul", ["xa", "w"], ["mm"]), helper.make_node("Add", ["mm", "bias"], ["y"])]
    inputs = [helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [n, c])]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, classes])
    return helper.make_model(helper.make_graph(nodes, "fc", inputs, [out], inits), opset_imports=OPSET), \
        ["x", "w", "bias"]


def resnet50_layers():
    """ResNet-50's units in forward order: (name, probe key); probe keys ``conv:c,h,k,co,s,relu,input_grad``."""
    out = [("conv1", "conv:3,224,7,64,2,1,0")]
    c, h = 64, 56
    for stage, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], 1):
        for b in range(blocks):
            s = stride if b == 0 else 1
            name = f"layer{stage}.{b}"
            out.append((f"{name}.conv1", f"conv:{c},{h},1,{width},1,1,1"))
            out.append((f"{name}.conv2", f"conv:{width},{h},3,{width},{s},1,1"))
            ho = h // s
            out.append((f"{name}.conv3", f"conv:{width},{ho},1,{width * 4},1,1,1"))
            if b == 0:  # the downsample branch (after conv3 in program order: its backward runs first)
                out.append((f"{name}.downsample", f"conv:{c},{h},1,{width * 4},{s},0,1"))
            c, h = width * 4, ho
    out.append(("fc", "fc:2048,1000"))
    return out


# -- the BERT-base-sized encoder ----------------------------------------------------------------------------------
HID, HEADS, FFN, VOCAB, SEQ = 768, 12, 3072, 30522, 128


def _ln(prefix, x, y, inits):
    inits += [numpy_helper.from_array(np.ones(HID, np.float32), f"{prefix}.gamma"),
              numpy_helper.from_array(np.zeros(HID, np.float32), f"{prefix}.beta")]
    return helper.make_node("LayerNormalization", [x, f"{prefix}.gamma", f"{prefix}.beta"], [y], axis=-1, epsilon=1e-12)


def encoder_layer(n):
    """One post-LN BERT layer on an n x SEQ x HID input plus a trained initializer ``x`` (its gradient: the
    layer's input gradient)."""
    rng = np.random.default_rng(0)
    inits = [_init(rng, "x", (n, SEQ, HID), 1.0)]
    nodes = [helper.make_node("Add", ["x_in", "xp"], ["x"])]
    inits[0].name = "xp"

    def linear(name, x, cin, cout, y):
        inits.extend([_init(rng, f"{name}.weight", (cin, cout), 0.02), _init(rng, f"{name}.bias", (cout,), 0.02)])
        nodes.extend([helper.make_node("MatMul", [x, f"{name}.weight"], [y + "_mm"]),
                      helper.make_node("Add", [y + "_mm", f"{name}.bias"], [y])])

    shape4 = numpy_helper.from_array(np.array([n, SEQ, HEADS, HID // HEADS], np.int64), "shape4")
    shape3 = numpy_helper.from_array(np.array([n, SEQ, HID], np.int64), "shape3")
    scale = numpy_helper.from_array(np.array(1 / np.sqrt(HID // HEADS), np.float32), "scale")
    half, one, rt2 = (numpy_helper.from_array(np.array(v, np.float32), k)
                      for k, v in (("half", 0.5), ("one", 1.0), ("rt2", np.sqrt(2.0))))
    inits += [shape4, shape3, scale, half, one, rt2]
    for t in ("q", "k", "v"):
        linear(f"attn.{t}", "x", HID, HID, t)
        nodes.append(helper.make_node("Reshape", [t, "shape4"], [t + "4"]))
        perm = [0, 2, 3, 1] if t == "k" else [0, 2, 1, 3]
        nodes.append(helper.make_node("Transpose", [t + "4"], [t + "h"], perm=perm))
    nodes += [helper.make_node("MatMul", ["qh", "kh"], ["sc"]), helper.make_node("Mul", ["sc", "scale"], ["scs"]),
              helper.make_node("Softmax", ["scs"], ["pr"], axis=-1), helper.make_node("MatMul", ["pr", "vh"], ["ctx"]),
              helper.make_node("Transpose", ["ctx"], ["ctxt"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ctxt", "shape3"], ["ctx3"])]
    linear("attn.out", "ctx3", HID, HID, "ao")
    nodes += [helper.make_node("Add", ["ao", "x"], ["r1"]), _ln("ln1", "r1", "h1", inits)]
    linear("ffn.fc1", "h1", HID, FFN, "f1")
    nodes += [helper.make_node("Div", ["f1", "rt2"], ["f1d"]), helper.make_node("Erf", ["f1d"], ["erf"]),
              helper.make_node("Add", ["erf", "one"], ["erf1"]), helper.make_node("Mul", ["f1", "erf1"], ["g0"]),
              helper.make_node("Mul", ["g0", "half"], ["gelu"])]
    linear("ffn.fc2", "gelu", FFN, HID, "f2")
    nodes += [helper.make_node("Add", ["f2", "h1"], ["r2"]), _ln("ln2", "r2", "y", inits)]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, SEQ, HID])
    params = ["xp"] + [i.name for i in inits if i.name.endswith((".weight", ".bias", ".gamma", ".beta"))]
    inputs = [helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [n, SEQ, HID])]
    return helper.make_model(helper.make_graph(nodes, "layer", inputs, [out], inits), opset_imports=OPSET), params


def embedding_unit(n):
    rng = np.random.default_rng(0)
    inits = [_init(rng, "word", (VOCAB, HID), 0.02), _init(rng, "position", (SEQ, HID), 0.02),
             _init(rng, "token_type", (1, HID), 0.02)]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [n, SEQ])
    nodes = [helper.make_node("Gather", ["word", "ids"], ["we"]), helper.make_node("Add", ["we", "position"], ["e1"]),
             helper.make_node("Add", ["e1", "token_type"], ["e2"])]
    nodes.append(_ln("emb_ln", "e2", "y", inits))
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, SEQ, HID])
    params = ["word", "position", "token_type", "emb_ln.gamma", "emb_ln.beta"]
    return helper.make_model(helper.make_graph(nodes, "emb", [ids], [out], inits), opset_imports=OPSET), params


def bert_layers():
    return [("embeddings", "emb"), *[(f"encoder.{i}", "enc") for i in range(12)]]


# -- probes and composition ----------------------------------------------------------------------------------------
def probe(key: str, batch: int) -> LayerTiming:
    kind, _, args = key.partition(":")
    if kind == "conv":
        c, h, k, co, s, relu, ig = map(int, args.split(","))
        model, params = conv_unit(batch, c, h, k, co, s, bool(relu), bool(ig))
    elif kind == "fc":
        model, params = fc_unit(batch, *map(int, args.split(",")))
    elif kind == "enc":
        model, params = encoder_layer(batch)
    else:
        model, params = embedding_unit(batch)
    return time_program(model, loss="mse", params=params, precision_mode="force_fp16")


def timings(keys, batch, cache_path, log, probe_batches=None):
    """Each probe's timing at ``batch``: simulated at that batch, or (``probe_batches`` (b1, b2) not holding it)
    extrapolated per launch from b1 and b2 along the line through them (module docstring)."""
    if probe_batches and batch not in probe_batches:
        b1, b2 = probe_batches
        lo, hi = timings(keys, b1, cache_path, log), timings(keys, b2, cache_path, log)
        return {k: extrapolate(lo[k], hi[k], b1, b2, batch) for k in keys}
    cache = json.loads(Path(cache_path).read_text()) if cache_path and Path(cache_path).exists() else {}
    out = {}
    for key in keys:
        ck = f"{key}@{batch}"
        if ck not in cache:
            t0 = time.perf_counter()
            t = probe(key, batch)
            cache[ck] = {"forward": t.forward, "kernels": [[s, list(n)] for s, n in t.kernels], "nbytes": t.nbytes}
            log(f"probe {ck}: {len(t.kernels)} backward launches, {sum(s for s, _ in t.kernels) * 1e3:.2f} ms "
                f"backward ({time.perf_counter() - t0:.0f} s wall)")
            if cache_path:
                Path(cache_path).write_text(json.dumps(cache, indent=0, sort_keys=True))
        d = cache[ck]
        out[key] = LayerTiming(d["forward"], tuple((s, tuple(n)) for s, n in d["kernels"]), d["nbytes"])
    return out


def extrapolate(lo: LayerTiming, hi: LayerTiming, b1: int, b2: int, batch: int) -> LayerTiming:
    """Launch by launch, ``t(batch) = t(b1) + (t(b2) - t(b1)) (batch - b1) / (b2 - b1)`` (at least 0), when
    both runs launch the same kernels producing the same gradients; else ``hi`` scaled by the totals' line."""
    f = (batch - b1) / (b2 - b1)

    def line(a, b):
        return max(0.0, a + (b - a) * f)

    if [n for _, n in lo.kernels] == [n for _, n in hi.kernels]:
        kernels = tuple((line(a, b), n) for (a, n), (b, _) in zip(lo.kernels, hi.kernels))
    else:
        s1, s2 = sum(s for s, _ in lo.kernels), sum(s for s, _ in hi.kernels)
        kernels = tuple((s * line(s1, s2) / s2, n) for s, n in hi.kernels)
    return LayerTiming(line(lo.forward, hi.forward), kernels, hi.nbytes)


def compose(layers, probes, update_s=None) -> StepProfile:
    """The network's step profile from its layers' probe timings (module docstring)."""
    forward = sum(probes[k].forward for _, k in layers)
    names, nbytes, kernels = [], [], []
    for lname, key in reversed(layers):
        t = probes[key]
        for s, made in t.kernels:
            idx = []
            for g in made:
                if g in ("x", "xp"):
                    continue
                idx.append(len(names))
                names.append(f"{lname}.{g}")
                nbytes.append(t.nbytes[g])
            kernels.append((s, tuple(idx)))
    if update_s is None:
        update_s = update_seconds(sum(nbytes) // 4)
    return StepProfile(tuple(names), tuple(nbytes), tuple(kernels), forward, update_s).check()


def scaled(profile: StepProfile, compute: float) -> StepProfile:
    """``profile`` with its forward and backward times scaled to ``compute`` seconds in total (update kept)."""
    f = compute / profile.compute_end
    return StepProfile(profile.names, profile.nbytes, tuple((s * f, g) for s, g in profile.kernels),
                       profile.forward * f, profile.update)


#: MindInsight's ResNet-50 8-device case (scale-out.md §1.1 [G7]): a 23.6 ms step with a 6.15 ms tail
PUBLISHED_COMPUTE = 23.6e-3 - 6.15e-3


def table(title, profile, configs, out):
    out(f"\n## {title}: {len(profile.names)} gradients, {sum(profile.nbytes) / 1e6:.1f} MB; forward "
        f"{profile.forward * 1e3:.2f} ms, backward {(profile.compute_end - profile.forward) * 1e3:.2f} ms, "
        f"update {profile.update * 1e3:.2f} ms (simulated)")
    out(f"{'devices':>7} {'links':>6} | " + " | ".join(f"{s:>19}" for s in grad_split.STRATEGIES))
    out(f"{'':>7} {'':>6} | " + " | ".join(f"{'iter/tail ms (segs)':>19}" for _ in grad_split.STRATEGIES))
    checks = []
    for p, links in configs:
        comm = CommModel(p, KIND[links])
        row = {}
        for s in grad_split.STRATEGIES:
            segs = grad_split.plan(s, profile, comm)
            row[s] = (simulate(profile, segs, comm), len(segs))
        cells = [f"{r.iteration * 1e3:8.2f}/{r.tail * 1e3:6.2f} ({n:3d})" for r, n in row.values()]
        out(f"{p:>7} {links:>6} | " + " | ".join(f"{c:>19}" for c in cells))
        best = min(r.iteration for r, _ in row.values())
        checks.append((p, links, row["auto"][0].iteration <= best * (1 + 1e-12),
                       1 - row["auto"][0].tail / row["one"][0].tail))
    for p, links, lowest, cut in checks:
        out(f"  {p} devices, {links}: auto lowest: {'yes' if lowest else 'NO'}; tail cut vs one segment {cut:.1%}")
    return checks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32, help="ResNet-50 images per device (default 32)")
    ap.add_argument("--bert-batch", type=int, default=8, help="encoder sequences of 128 tokens per device (default 8)")
    ap.add_argument("--cache", help="a JSON file keeping the probes' simulated timings between runs")
    ap.add_argument("--skip-bert", action="store_true")
    ap.add_argument("--probe-batches", default="1,4", help="simulate each layer at these two batches and extrapolate "
                    "linearly to --batch / --bert-batch ('' : simulate at those batches; default 1,4)")
    args = ap.parse_args()
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    layers = resnet50_layers()
    pb = tuple(int(b) for b in args.probe_batches.split(",")) if args.probe_batches else None
    probes = timings(sorted({k for _, k in layers}), args.batch, args.cache, log, pb)
    rn = compose(layers, probes)
    assert len(rn.names) == 161, len(rn.names)
    checks = table(f"ResNet-50, {args.batch} images per device", rn, CONFIGS, print)
    table(f"ResNet-50 with its forward + backward scaled to {PUBLISHED_COMPUTE * 1e3:.2f} ms (MindInsight's "
          f"8-device step, 23.6 ms, minus its 6.15 ms tail: hardware speed; the simulated kernels' shares kept)",
          scaled(rn, PUBLISHED_COMPUTE), CONFIGS, print)
    if not args.skip_bert:
        layers = bert_layers()
        probes = timings(sorted({k for _, k in layers}), args.bert_batch, args.cache, log, pb)
        bert = compose(layers, probes)
        checks += table(f"BERT-base-sized encoder, {args.bert_batch} x {SEQ} tokens per device", bert, CONFIGS, print)
    print(f"\nauto lowest everywhere: {'yes' if all(c[2] for c in checks) else 'NO'}; ResNet-50 8-device tail cut vs "
          f"one segment: {checks[0][3]:.1%}")


if __name__ == "__main__":
    main()
