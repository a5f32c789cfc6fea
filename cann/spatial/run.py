"""Run a spatial bundle (:mod:`cann.spatial.bundle`): one simulated device per rank.

:func:`rank_steps` is a device's program as a generator: it runs its segments on the simulator and, at
each exchange, yields ``(exchange id, its own block)`` and receives the assembled need block. Two drivers
feed it:

* :func:`run_mpi_rank` -- one MPI rank per device (``mpiexec -n R*C cann-run OUT.om ...``): each rank reads
  only its block of a memory-mapped input ``.npy``, exchanges halos with two non-blocking neighbour
  alltoallv on a Cartesian communicator (rows, then columns carrying the received rows, hence the
  corners; :func:`halo_exchange_mpi`), and writes its block of a memory-mapped output ``.npy``;
* :func:`run_emulated` -- every device in one process, in lockstep (tests, planning; holds the whole image).

Time is simulated, never measured: each device's compute is its segments' simulated cycles, each exchange
is costed by the link model (:mod:`cann.hw.links`), and the part of an exchange that the next segment's
interior work (outputs that read no halo) can hide is subtracted (:func:`step_time`).
"""

from __future__ import annotations

from collections.abc import Generator

import numpy as np

from cann.errors import CannError
from cann.passes.spatial.halo import split
from cann.runtime import Model
from cann.spatial.bundle import SpatialBundle


def own_block(extent, grid, rank) -> tuple[int, int, int, int]:
    """``(h0, h1, w0, w1)`` of ``rank``'s slice of a tensor of spatial ``extent`` on ``grid`` (row-major)."""
    (H, W), (R, C) = extent, grid
    (h0, h1), (w0, w1) = split(H, R)[rank // C], split(W, C)[rank % C]
    return h0, h1, w0, w1


def rank_steps(bundle: SpatialBundle, rank: int, inputs: dict[str, np.ndarray],
               stats: list | None = None) -> Generator[tuple[int, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
    """Device ``rank``'s program (see the module docstring); ``inputs``: its own blocks by model input name;
    returns its own blocks of the outputs. ``stats`` collects ``("run", blob, cycles)`` and
    ``("exchange", id, 0)`` records in order."""
    prog = bundle.manifest["ranks"][rank]
    store: dict[int, np.ndarray] = {prog["inputs"][k]: v for k, v in inputs.items()}
    last: dict[int, int] = {}  # tensor -> the last step reading it: blocks are dropped after it
    for i, st in enumerate(prog["steps"]):
        for t in st["in"] if "run" in st else [st["src"]]:
            last[t] = i
    keep = set(prog["outputs"].values())
    for i, st in enumerate(prog["steps"]):
        for t in [t for t in store if t not in keep and last.get(t, -1) < i]:
            del store[t]
        if "run" in st:
            model = Model(bundle.models[st["run"]])
            feeds = {t.name: store[i] for t, i in zip(model.inputs, st["in"])}
            outs = model.run(feeds)
            for t, i in zip(model.outputs, st["out"]):
                store[i] = outs[t.name]
            if stats is not None:
                stats.append(("run", st["run"], model.last_run.cycles))
        else:
            store[st["dst"]] = yield st["exchange"], store[st["src"]]
            if stats is not None:
                stats.append(("exchange", st["exchange"], 0))
    return {name: store[i] for name, i in prog["outputs"].items()}


def _assemble(ex: dict, grid, blocks: list[np.ndarray], rank: int) -> np.ndarray:
    h0, h1, w0, w1 = ex["need"][rank]
    first = blocks[0]
    out = np.empty((*first.shape[:2], h1 - h0, w1 - w0), first.dtype)
    for q, blk in enumerate(blocks):
        a0, a1, b0, b1 = own_block(ex["extent"], grid, q)
        lo_h, hi_h, lo_w, hi_w = max(a0, h0), min(a1, h1), max(b0, w0), min(b1, w1)
        if lo_h < hi_h and lo_w < hi_w:
            out[:, :, lo_h - h0:hi_h - h0, lo_w - w0:hi_w - w0] = blk[:, :, lo_h - a0:hi_h - a0, lo_w - b0:hi_w - b0]
    return out


def run_emulated(bundle: SpatialBundle, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list]:
    """Run every device in this process in lockstep: whole inputs by name -> (whole outputs by name,
    per-rank stats lists as :func:`rank_steps` records them)."""
    grid, n = bundle.grid, bundle.ranks
    exchanges = {e["id"]: e for e in bundle.manifest["exchanges"]}
    stats = [[] for _ in range(n)]
    gens, pending, results = [], [None] * n, [None] * n
    for rank in range(n):
        own = {}
        for spec in bundle.manifest["inputs"]:
            h0, h1, w0, w1 = own_block(spec["shape"][2:], grid, rank)
            own[spec["name"]] = np.ascontiguousarray(inputs[spec["name"]][:, :, h0:h1, w0:w1])
        gens.append(rank_steps(bundle, rank, own, stats[rank]))
    send = [None] * n
    while True:
        for rank, g in enumerate(gens):
            if results[rank] is not None:
                continue
            try:
                pending[rank] = g.send(send[rank]) if send[rank] is not None else next(g)
            except StopIteration as stop:
                results[rank], pending[rank] = stop.value, None
        if all(r is not None for r in results):
            break
        ids = {p[0] for p in pending if p is not None}
        if len(ids) != 1 or any(p is None for p in pending):
            raise CannError("spatial bundle", f"devices disagree on the next exchange ({sorted(ids)})")
        ex = exchanges[ids.pop()]
        blocks = [p[1] for p in pending]
        send = [_assemble(ex, grid, blocks, rank) for rank in range(n)]
    outputs = {}
    for spec in bundle.manifest["outputs"]:
        full = np.empty(spec["shape"], results[0][spec["name"]].dtype)
        for rank in range(n):
            h0, h1, w0, w1 = own_block(spec["shape"][2:], grid, rank)
            full[:, :, h0:h1, w0:w1] = results[rank][spec["name"]]
        outputs[spec["name"]] = full
    return outputs, stats


# -- MPI -----------------------------------------------------------------------------------------------------


def _inter(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return max(a[0], b[0]), min(a[1], b[1])


def halo_exchange_mpi(cart, ex: dict, grid, rank: int, block: np.ndarray) -> np.ndarray:
    """Assemble ``rank``'s need block of exchange ``ex`` from its own ``block`` and its neighbours' over the
    Cartesian communicator ``cart`` (dims ``grid``, non-periodic): phase 1 sends rows up and down
    (own columns), phase 2 sends columns left and right (the rows assembled in phase 1, so corners travel
    through the side neighbour). Each phase is one ``Ineighbor_alltoallv`` in bytes; neighbours at the image
    border are ``MPI.PROC_NULL`` (nothing sent or received)."""
    from mpi4py import MPI

    R, C = grid
    r, c = divmod(rank, C)
    H, W = ex["extent"]
    rows, cols = split(H, R), split(W, C)
    need = ex["need"]
    nr = (need[rank][0], need[rank][1])
    nc = (need[rank][2], need[rank][3])
    for q in range(R * C):  # the two-phase exchange needs one row need per grid row, one column need per column
        if (q // C == r and tuple(need[q][:2]) != nr) or (q % C == c and tuple(need[q][2:]) != nc):
            raise CannError(f"halo exchange {ex['id']}", "need blocks differ along a grid row or column")
    N, Ch = block.shape[:2]
    item = block.dtype.itemsize

    def phase(axis: int, data: np.ndarray, lo: int) -> np.ndarray:
        """Exchange along ``axis`` (2 rows / 3 columns) of ``data`` whose index 0 on that axis is global ``lo``."""
        me = r if axis == 2 else c
        own = (rows if axis == 2 else cols)[me]
        mine_need = nr if axis == 2 else nc
        send_parts, recv_shapes = [], []
        for d in (-1, 1):
            q = me + d
            if 0 <= q < (R if axis == 2 else C):
                qn = need[q * C + c][:2] if axis == 2 else need[r * C + q][2:]
                s0, s1 = _inter(own, tuple(qn))
                recv = _inter(mine_need, (rows if axis == 2 else cols)[q])
            else:
                s0 = s1 = 0
                recv = (0, 0)
            sl = [slice(None)] * 4
            sl[axis] = slice(s0 - lo, s1 - lo) if s1 > s0 else slice(0, 0)
            send_parts.append(np.ascontiguousarray(data[tuple(sl)]))
            shape = list(data.shape)
            shape[axis] = max(0, recv[1] - recv[0])
            recv_shapes.append((recv, shape))
        zero = [np.zeros(0, np.uint8), np.zeros(0, np.uint8)]
        parts = (send_parts + zero) if axis == 2 else (zero + send_parts)
        sbytes = [p.view(np.uint8).reshape(-1) for p in parts]
        rsizes = [int(np.prod(s)) * item for _, s in recv_shapes]
        rsizes = (rsizes + [0, 0]) if axis == 2 else ([0, 0] + rsizes)
        sbuf = np.concatenate(sbytes) if sum(map(len, sbytes)) else np.zeros(1, np.uint8)
        rbuf = np.zeros(max(sum(rsizes), 1), np.uint8)
        scounts = [len(b) for b in sbytes]
        sdispl = list(np.cumsum([0] + scounts[:-1]))
        rdispl = list(np.cumsum([0] + rsizes[:-1]))
        req = cart.Ineighbor_alltoallv([sbuf, (scounts, sdispl), MPI.BYTE], [rbuf, (rsizes, rdispl), MPI.BYTE])
        req.Wait()
        k = 0 if axis == 2 else 2
        (before, bshape), (after, ashape) = recv_shapes
        got_b = rbuf[rdispl[k]:rdispl[k] + rsizes[k]].view(block.dtype).reshape(bshape)
        got_a = rbuf[rdispl[k + 1]:rdispl[k + 1] + rsizes[k + 1]].view(block.dtype).reshape(ashape)
        mid0, mid1 = _inter(mine_need, own)
        sl = [slice(None)] * 4
        sl[axis] = slice(mid0 - lo, mid1 - lo)
        return np.concatenate([got_b, data[tuple(sl)], got_a], axis=axis)

    rows_done = phase(2, block, rows[r][0])
    return np.ascontiguousarray(phase(3, rows_done, cols[c][0]))


def on_every_rank(e: CannError) -> CannError:
    """Mark ``e`` as raised alike by every rank (a check of the command line, the world size or an input
    file that each rank makes): ``cann-run`` prints it on rank 0 only, one line rather than one per rank."""
    e.every_rank = True
    return e


def run_mpi_rank(bundle_path: str, inputs: dict[str, str], output: str | None, comm=None) -> dict:
    """This rank's part of a distributed run: ``inputs`` model input name -> ``.npy`` path (memory-mapped,
    only this rank's block read), ``output`` a ``.npy`` path for a single-output model (created by rank 0,
    each rank writes its block). Returns ``{"rank", "stats"`` (as :func:`rank_steps` records them),
    ``"bundle"``, ``"time"}``: on rank 0 the simulated time of the step (:func:`step_time`), else None.

    Raises:
        CannError: a world size other than the grid's, an input of another shape or dtype."""
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    from cann.spatial.bundle import load_bundle

    head = load_bundle(bundle_path, blobs=set())
    R, C = head.grid
    if comm.size != R * C:
        raise on_every_rank(CannError(bundle_path, f"partitioned for a {R}x{C} grid: run it with mpiexec -n {R * C} "
                                     f"(this run has {comm.size} rank{'s' if comm.size != 1 else ''})"))
    rank = comm.rank
    mine = {st["run"] for st in head.manifest["ranks"][rank]["steps"] if "run" in st}
    bundle = load_bundle(bundle_path, blobs=mine)
    cart = comm.Create_cart((R, C), periods=(False, False), reorder=False)
    own = {}
    for spec in bundle.manifest["inputs"]:
        arr = np.load(inputs[spec["name"]], mmap_mode="r")
        if list(arr.shape) != spec["shape"] or str(arr.dtype) != spec["dtype"]:
            raise on_every_rank(CannError(inputs[spec["name"]], f"input '{spec['name']}' is {arr.dtype} "
                                          f"{list(arr.shape)}, the model takes {spec['dtype']} {spec['shape']}"))
        h0, h1, w0, w1 = own_block(spec["shape"][2:], (R, C), rank)
        own[spec["name"]] = np.ascontiguousarray(arr[:, :, h0:h1, w0:w1])
        del arr
    exchanges = {e["id"]: e for e in bundle.manifest["exchanges"]}
    stats: list = []
    gen = rank_steps(bundle, rank, own, stats)
    try:
        req = next(gen)
        while True:
            eid, blk = req
            req = gen.send(halo_exchange_mpi(cart, exchanges[eid], (R, C), rank, blk))
    except StopIteration as stop:
        result = stop.value
    if output is not None:
        (spec,) = bundle.manifest["outputs"]
        if rank == 0:
            np.lib.format.open_memmap(output, mode="w+", dtype=np.dtype(spec["dtype"]), shape=tuple(spec["shape"]))
        comm.Barrier()
        mm = np.load(output, mmap_mode="r+")
        h0, h1, w0, w1 = own_block(spec["shape"][2:], (R, C), rank)
        mm[:, :, h0:h1, w0:w1] = result[spec["name"]]
        mm.flush()
        del mm
        comm.Barrier()
    everyone = comm.gather(stats)
    return {"rank": rank, "stats": stats, "bundle": bundle,
            "time": step_time(bundle, everyone) if rank == 0 else None}


# -- simulated time --------------------------------------------------------------------------------------------

FP16_MODES = ("force_fp16", "allow_fp32_to_fp16", "allow_mix_precision")


def exchange_messages(bundle: SpatialBundle, eid: int, rank: int) -> list[tuple[int, int, int]]:
    """The messages ``rank`` receives in exchange ``eid``: ``(phase, source rank, bytes)``, phase 0 rows from
    the grid neighbours above/below, phase 1 columns (with the received rows) from left/right. Bytes are in the
    device's storage dtype (float16 under the fp16 precision modes), as the device would send them."""
    ex = next(e for e in bundle.manifest["exchanges"] if e["id"] == eid)
    R, C = bundle.grid
    r, c = divmod(rank, C)
    H, W = ex["extent"]
    rows, cols = split(H, R), split(W, C)
    h0, h1, w0, w1 = ex["need"][rank]
    item = np.dtype(ex["dtype"]).itemsize
    if bundle.manifest["precision_mode"] in FP16_MODES and np.dtype(ex["dtype"]) == np.float32:
        item = 2
    per = ex["batch"] * ex["channels"] * item
    msgs = []
    for q in (r - 1, r + 1):
        if 0 <= q < R:
            n = max(0, min(h1, rows[q][1]) - max(h0, rows[q][0])) * (cols[c][1] - cols[c][0])
            if n:
                msgs.append((0, q * C + c, n * per))
    for q in (c - 1, c + 1):
        if 0 <= q < C:
            n = max(0, min(w1, cols[q][1]) - max(w0, cols[q][0])) * (h1 - h0)
            if n:
                msgs.append((1, r * C + q, n * per))
    return msgs


def step_time(bundle: SpatialBundle, stats: list[list], cluster=None) -> dict:
    """Simulated time of one inference on the grid, from each rank's per-segment cycles (``stats`` as
    :func:`rank_steps` records them) and the link model (``cluster``: a :class:`cann.hw.links.ClusterSpec`,
    default Atlas800).

    Per rank and exchange: each phase takes its slowest message (the two neighbours of a phase use two links
    at once), the phases add. The exchange overlaps the interior work of the next segment: the share of the
    need block the rank owns, times that segment's time, is the most of the exchange it can hide (a model:
    the interior outputs read no halo). A rank's time is its compute plus the exchange it does not hide; the
    step is the slowest rank. Returns seconds and bytes: ``step``, ``compute`` / ``exchange`` / ``hidden`` (per
    rank lists), ``halo_bytes`` (per exchange, all ranks) and ``halo_bytes_step``."""
    from cann.hw.config import load_soc
    from cann.hw.links import load_cluster

    cluster = cluster or load_cluster()
    hz = load_soc(bundle.manifest["soc_version"]).clock_mhz * 1e6
    exchanges = {e["id"]: e for e in bundle.manifest["exchanges"]}
    R, C = bundle.grid
    compute, exch, hidden = [], [], []
    halo = {e: 0 for e in exchanges}
    for rank, recs in enumerate(stats):
        t_comp = sum(cyc for kind, _, cyc in recs if kind == "run") / hz
        t_ex = t_hide = 0.0
        for i, (kind, eid, _) in enumerate(recs):
            if kind != "exchange":
                continue
            msgs = exchange_messages(bundle, eid, rank)
            halo[eid] += sum(m[2] for m in msgs)
            t = sum(max((cluster.link_between(src, rank).time(b) for ph, src, b in msgs if ph == p), default=0.0)
                    for p in (0, 1))
            nxt = next((cyc for k, _, cyc in recs[i + 1:] if k == "run"), 0) / hz
            h0, h1, w0, w1 = exchanges[eid]["need"][rank]
            a0, a1, b0, b1 = own_block(exchanges[eid]["extent"], (R, C), rank)
            inner = max(0, min(a1, h1) - max(a0, h0)) * max(0, min(b1, w1) - max(b0, w0))
            frac = inner / max(1, (h1 - h0) * (w1 - w0))
            t_ex += t
            t_hide += min(t, frac * nxt)
        compute.append(t_comp)
        exch.append(t_ex)
        hidden.append(t_hide)
    step = max(c + e - h for c, e, h in zip(compute, exch, hidden))
    return {"step": step, "compute": compute, "exchange": exch, "hidden": hidden, "halo_bytes": halo,
            "halo_bytes_step": sum(halo.values())}


def format_time(t: dict, grid) -> str:
    """One line: the simulated step and its parts (microseconds), the halo bytes per step."""
    i = max(range(len(t["compute"])), key=lambda k: t["compute"][k] + t["exchange"][k] - t["hidden"][k])
    return (f"spatial {grid[0]}x{grid[1]}: simulated step {t['step'] * 1e6:.1f} us (slowest device {i}: compute "
            f"{t['compute'][i] * 1e6:.1f} us, halo exchange {t['exchange'][i] * 1e6:.1f} us of which "
            f"{t['hidden'][i] * 1e6:.1f} us hidden by interior compute); halo {t['halo_bytes_step']} bytes per step "
            f"in {len(t['halo_bytes'])} exchanges")
