"""The MPI foundation (issue 15): mpiexec from the venv, oversubscribed, with a timeout on every run.

Each multi-rank case runs through :func:`cann.testing.run_mpi`, so a deadlock fails the test after its
timeout instead of hanging CI."""

import sys
import textwrap

import pytest

from cann.testing import mpiexec_path, run_mpi


def test_mpiexec_is_the_venvs():
    exe = mpiexec_path()
    assert exe.parent == __import__("pathlib").Path(sys.executable).parent


@pytest.mark.parametrize("ranks", [2, 4])
def test_ranks_see_the_world(ranks):
    r = run_mpi(ranks, [sys.executable, "-c", "from mpi4py import MPI; c = MPI.COMM_WORLD; "
                "g = c.gather((c.rank, c.size)); print(g) if c.rank == 0 else None"], timeout=60)
    assert eval(r.stdout) == [(i, ranks) for i in range(ranks)]  # rank 0 prints alone: no interleaving


HALO = textwrap.dedent("""
    import numpy as np
    from mpi4py import MPI
    R, C = map(int, __import__("sys").argv[1:3])
    cart = MPI.COMM_WORLD.Create_cart((R, C), periods=(False, False))
    r, c = cart.Get_coords(cart.rank)
    H = W = 6
    full = np.arange(R * H * C * W, dtype=np.float64).reshape(R * H, C * W)
    tile = np.ascontiguousarray(full[r * H:(r + 1) * H, c * W:(c + 1) * W])
    # neighbours of a Cartesian topology: (dim 0: up, down), (dim 1: left, right); PROC_NULL at the edges
    send = [tile[0].copy(), tile[-1].copy(), tile[:, 0].copy(), tile[:, -1].copy()]
    recv = [np.full(W, -1.0), np.full(W, -1.0), np.full(H, -1.0), np.full(H, -1.0)]
    sbuf, rbuf = np.concatenate(send), np.concatenate(recv)
    counts = [W, W, H, H]
    displs = [0, W, 2 * W, 2 * W + H]
    req = cart.Ineighbor_alltoallv([sbuf, (counts, displs), MPI.DOUBLE], [rbuf, (counts, displs), MPI.DOUBLE])
    req.Wait()
    up, down, left, right = np.split(rbuf, np.cumsum(counts)[:-1])
    ok = True
    if r > 0: ok &= np.array_equal(up, full[r * H - 1, c * W:(c + 1) * W])
    else: ok &= bool((up == -1).all())
    if r < R - 1: ok &= np.array_equal(down, full[(r + 1) * H, c * W:(c + 1) * W])
    else: ok &= bool((down == -1).all())
    if c > 0: ok &= np.array_equal(left, full[r * H:(r + 1) * H, c * W - 1])
    else: ok &= bool((left == -1).all())
    if c < C - 1: ok &= np.array_equal(right, full[r * H:(r + 1) * H, (c + 1) * W])
    else: ok &= bool((right == -1).all())
    g = cart.gather((cart.rank, int(ok)))
    if cart.rank == 0:
        print(g)
""")


@pytest.mark.parametrize("grid", [(1, 2), (2, 1), (2, 2), (1, 4)])
def test_neighbour_alltoallv_halo_on_a_cartesian_grid(grid, tmp_path):
    """One-row/one-column halos through Ineighbor_alltoallv arrive from the right neighbours; edges
    (PROC_NULL) leave the receive buffer untouched."""
    script = tmp_path / "halo.py"
    script.write_text(HALO)
    R, C = grid
    r = run_mpi(R * C, [sys.executable, script, R, C], timeout=60)
    assert eval(r.stdout) == [(i, 1) for i in range(R * C)]


def test_a_deadlock_times_out(tmp_path):
    """Rank 0 waits for a message nobody sends: the run is killed and TimeoutError raised."""
    code = "from mpi4py import MPI; c = MPI.COMM_WORLD; c.recv(source=1) if c.rank == 0 else None"
    with pytest.raises(TimeoutError, match="deadlock"):
        run_mpi(2, [sys.executable, "-c", code], timeout=5)


def test_a_failing_rank_is_an_error():
    with pytest.raises(RuntimeError, match="exit"):
        run_mpi(2, [sys.executable, "-c", "import sys; sys.exit(3)"], timeout=30)


def test_cann_run_needs_the_grids_rank_count(tmp_path):
    """A 1x2 bundle run by 1 rank (no mpiexec) or by 3: one error line naming the mpiexec -n to use; a 1x2
    run writes the unpartitioned model's output."""
    import subprocess

    import numpy as np
    import onnx

    from test_device_memory import conv_model

    onnx.save(conv_model(), tmp_path / "m.onnx")
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for args in (["--spatial-split", "1x2", "-o", "big.om"], ["-o", "m.om"]):
        r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", "m.onnx", *args], capture_output=True,
                           text=True, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    cmd = [sys.executable, "-m", "cann.tools.cann_run", "big.om", "--input", "x.npy", "--output", "y.npy"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "error: big.om: partitioned for a 1x2 grid: run it with mpiexec -n 2 (this run has 1 rank)"]
    with pytest.raises(RuntimeError, match="run it with mpiexec -n 2 \\(this run has 3 ranks\\)"):
        run_mpi(3, cmd[:], timeout=120, cwd=tmp_path)
    run_mpi(2, cmd, timeout=120, cwd=tmp_path)
    subprocess.run([sys.executable, "-m", "cann.tools.cann_run", "m.om", "--input", "x.npy", "--output", "ref.npy"],
                   check=True, capture_output=True, cwd=tmp_path)
    y, ref = np.load(tmp_path / "y.npy"), np.load(tmp_path / "ref.npy")
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-3  # force_fp16 both


def test_an_error_every_rank_meets_is_one_line(tmp_path):
    """A check every rank makes alike (the world size, an input's dtype, a flag that does not apply) is printed
    by rank 0 only, on one whole line, exit status 2; before, each rank printed it and the lines interleaved."""
    import subprocess

    import numpy as np
    import onnx

    from test_device_memory import conv_model

    onnx.save(conv_model(), tmp_path / "m.onnx")
    np.save(tmp_path / "x64.npy", np.zeros((1, 3, 16, 16)))
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    r = subprocess.run([sys.executable, "-m", "cann.tools.cann_compile", "m.onnx", "--spatial-split", "1x2", "-o",
                        "big.om"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    run = [sys.executable, "-m", "cann.tools.cann_run", "big.om"]
    cases = [(2, ["--input", "x64.npy", "--output", "y.npy"],
              "error: x64.npy: input 'x' is float64 [1, 3, 16, 16], the model takes float32 [1, 3, 16, 16]"),
             (3, ["--input", "x.npy", "--output", "y.npy"],
              "error: big.om: partitioned for a 1x2 grid: run it with mpiexec -n 2 (this run has 3 ranks)"),
             (2, ["--input", "x.npy", "--timing-only"],
              "error: --timing-only: does not apply to big.om, a spatially partitioned model")]
    for ranks, args, line in cases:
        with pytest.raises(RuntimeError) as err:
            run_mpi(ranks, run + args, timeout=120, cwd=tmp_path)
        assert "exit 2;" in str(err.value)
        assert str(err.value).split("stderr:\n", 1)[1].splitlines() == [line]
    assert not (tmp_path / "y.npy").exists()
