"""The .om container: round trip, determinism, every kind of corruption, atomic writes."""

import hashlib
import os
import struct
from dataclasses import replace

import pytest

from cann.codegen.om import (
    CHECKSUM_SIZE,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    VERSION,
    IoTensor,
    Kernel,
    Launch,
    LaunchWork,
    OfflineModel,
    decode_om,
    encode_om,
    read_om,
    write_om,
)
from cann.errors import CannError
from cann.hw import isa

TABLE = HEADER.size  # file offset of the section table (format 5)

CODE = isa.encode([isa.make("block_offset", arg=1, stride=64), isa.make("loop_begin", count=3),
                   isa.make("loop_offset", arg=2, stride=32), isa.make("pipe_barrier", pipe=6),
                   isa.make("loop_end")])


def small_model() -> OfflineModel:
    return OfflineModel(
        soc_version="Ascend910",
        precision_mode="force_fp16",
        inputs=(IoTensor("x:0", (1, 3, 4, 4), "float32", 0),),
        outputs=(IoTensor("logits", (1, 10), "float16", 256), IoTensor("idx", (1,), "int64", 320)),
        gm_size=4096,
        weights_offset=1024,
        weights=bytes(range(200)) * 3,
        kernels=(Kernel("conv_0", 2, 3, CODE, ("conv1", "relu1")), Kernel("gemm_1", 1, 2, b"")),
        launches=(Launch(0, (0, 1024, 2048), LaunchWork(2 ** 40 + 3, 2, 5, 6, 7, 2 ** 33)), Launch(1, (2048, 256)),
                  Launch(0, (2048, 1100, 3000), LaunchWork(model_macs=9, cube_itemsize=4))),
    )


def test_rotations_in_a_loop_are_valid_code(tmp_path):
    rotated = isa.encode([isa.make("loop_begin", count=4),
                          isa.make("loop_rotate", space=isa.SPACE_CODES["ub"], base=0, size=512, copies=2, step=1),
                          isa.make("loop_rotate_event", src_pipe=4, dst_pipe=1, base=0, copies=2, step=1),
                          isa.make("pipe_barrier", pipe=6), isa.make("loop_end")])
    m = small_model()
    m = replace(m, kernels=(replace(m.kernels[0], code=rotated), *m.kernels[1:]))
    write_om(m, tmp_path / "r.om")
    assert read_om(tmp_path / "r.om") == m


def test_round_trip(tmp_path):
    m = small_model()
    p = tmp_path / "m.om"
    write_om(m, p)
    assert read_om(p) == m
    assert read_om(str(p)) == m


def test_empty_model_round_trips(tmp_path):
    m = OfflineModel("Ascend310", "must_keep_origin_dtype", (), (), 0, 0, b"", (), ())
    write_om(m, tmp_path / "e.om")
    assert read_om(tmp_path / "e.om") == m


def test_deterministic(tmp_path):
    write_om(small_model(), tmp_path / "a.om")
    write_om(small_model(), tmp_path / "b.om")
    assert (tmp_path / "a.om").read_bytes() == (tmp_path / "b.om").read_bytes()


def test_layout_header_and_weights_alignment():
    data = encode_om(small_model())
    assert data[:8] == MAGIC
    assert struct.unpack_from("<I", data, 8)[0] == VERSION
    assert data[-CHECKSUM_SIZE:] == hashlib.sha256(data[:-CHECKSUM_SIZE]).digest()
    # section entry 2 is the weights section
    off, size = struct.unpack_from("<QQ", data, TABLE + 2 * 16)
    assert off % 64 == 0 and size == 600
    assert data[off : off + size] == small_model().weights


def test_overwrites_existing_file(tmp_path):
    p = tmp_path / "m.om"
    p.write_bytes(b"old")
    write_om(small_model(), p)
    assert read_om(p) == small_model()


def _reject(data: bytes, fragment: str = "") -> CannError:
    with pytest.raises(CannError) as e:
        decode_om(data, "m.om")
    assert e.value.diagnostics[0].location == "m.om"
    assert fragment in e.value.diagnostics[0].message
    return e.value


@pytest.mark.parametrize("n", [0, 3, 8, 12, 40, HEADER_SIZE, HEADER_SIZE + 10, -CHECKSUM_SIZE - 1, -CHECKSUM_SIZE, -1])
def test_truncated(n):
    data = encode_om(small_model())
    _reject(data[:n])


def test_flipped_bytes_are_all_rejected():
    data = encode_om(small_model())
    for i in range(len(data)):  # every byte of the file, one at a time
        bad = bytearray(data)
        bad[i] ^= 0x5A
        _reject(bytes(bad))


def test_bad_magic(tmp_path):
    p = tmp_path / "m.om"
    p.write_bytes(b"\x08\x01\x12\x04onnx-like-protobuf" * 4)
    with pytest.raises(CannError) as e:
        read_om(p)
    assert e.value.lines() == [f"error: {p}: not a cann offline model (bad magic)"]
    # a model given where its .om is wanted (`cann-run model.onnx`): say what to do with it
    q = tmp_path / "m.onnx"
    q.write_bytes(p.read_bytes())
    with pytest.raises(CannError) as e:
        read_om(q)
    assert e.value.lines() == [f"error: {q}: not a cann offline model (bad magic): a model to compile first "
                               f"(cann-compile {q} -o {tmp_path / 'm'}.om)"]


def _with_fixed_checksum(data: bytearray) -> bytes:
    body = bytes(data[:-CHECKSUM_SIZE])
    return body + hashlib.sha256(body).digest()


def test_wrong_version():
    data = bytearray(encode_om(small_model()))
    struct.pack_into("<I", data, 8, 99)
    _reject(_with_fixed_checksum(data), "unsupported .om format version 99")


def test_checksum_mismatch_message():
    data = bytearray(encode_om(small_model()))
    data[-40] ^= 1
    _reject(bytes(data), "checksum mismatch")


def test_checksum_checked_before_parsing_payload():
    # a payload whose tables would not parse: still reported as a checksum problem
    data = bytearray(encode_om(small_model()))
    data[HEADER_SIZE : HEADER_SIZE + 4] = b"\xff\xff\xff\xff"
    _reject(bytes(data), "checksum mismatch")


def _code(*instrs) -> bytes:
    return isa.encode([isa.make(m, **f) for m, f in instrs])


K1 = Kernel("gemm_1", 1, 2, b"")
BAD = "inconsistent .om: "


@pytest.mark.parametrize(
    "change, message",
    [
        # launches against the kernel table and the arena
        (dict(launches=(Launch(5, ()),)), "launch 0 kernel 5 outside [0, 1] (the last kernel index)"),
        (dict(kernels=(), launches=(Launch(0, ()),)), "launch 0 kernel 0: no value is valid (the last kernel index is -1)"),
        (dict(launches=(Launch(1, (1,)),)), "launch 0 passes 1 arguments to kernel 'gemm_1' taking 2"),
        (dict(launches=(Launch(1, (0, 4096)),)), "launch 0 argument 1 offset 4096 outside gm_size 4096"),
        # the arena against the SoC's memory, the weights against the arena
        (dict(gm_size=10**12), "gm_size 1000000000000 outside [0, 34359738368] (the SoC's gm_bytes)"),
        (dict(gm_size=2**64 - 1), f"gm_size {2**64 - 1} outside [0, 34359738368] (the SoC's gm_bytes)"),
        (dict(soc_version="Ascend310", gm_size=2**33 + 1), f"gm_size {2**33 + 1} outside [0, 8589934592] (the SoC's gm_bytes)"),
        (dict(gm_size=1000), "weights_offset 1024 outside [0, 400] (gm_size minus the weights' size)"),
        (dict(gm_size=500), "the weights need 600 bytes, more than gm_size 500"),
        # I/O tensors: size, dtype, rank, names
        (dict(inputs=(IoTensor("x", (1, 1025), "float32", 0),)), "input 'x' (1, 1025) float32 needs 4100 bytes, more than gm_size 4096"),
        (dict(inputs=(IoTensor("x", (2**62, 4), "float32", 0),)), f"input 'x' ({2**62}, 4) float32 needs {2**66} bytes, more than gm_size 4096"),
        (dict(outputs=(IoTensor("y", (0, 2**62), "float32", 0),)),  # zero-size, but numpy cannot shape it
         f"output 'y' (0, {2**62}): its dimensions (zeros counted as 1) span more than the SoC's gm_bytes 34359738368"),
        (dict(outputs=(IoTensor("y", (2,), "float32", 4090),)), "output 'y' (8 bytes) gm_offset 4090 outside [0, 4088] (gm_size minus its size)"),
        (dict(outputs=(IoTensor("y", (2,), "nonsense", 0),)), "output 'y' has unknown dtype 'nonsense'"),
        (dict(outputs=(IoTensor("y", (2,), "object", 0),)), "output 'y' has unknown dtype 'object'"),
        (dict(outputs=(IoTensor("y", (-2,), "int8", 0),)), "output 'y' has a negative dimension (-2,)"),
        (dict(outputs=(IoTensor("y", (1,) * 33, "int8", 0),)), "output 'y' has rank 33, more than 32"),
        (dict(inputs=(IoTensor("x", (1,), "int8", 0), IoTensor("x", (1,), "int8", 8))), "input name 'x' appears twice"),
        (dict(outputs=(IoTensor("y", (1,), "int8", 0), IoTensor("y", (1,), "int8", 8))), "output name 'y' appears twice"),
        # strings
        (dict(precision_mode="fast"), "unknown precision_mode 'fast' (known: force_fp16, allow_fp32_to_fp16, "
                                      "must_keep_origin_dtype, force_fp32, allow_mix_precision)"),
        (dict(soc_version="../../elsewhere/bad"), "unknown soc_version '../../elsewhere/bad' (known: Ascend310, "
                                                  "Ascend910, Ascend910B1)"),
        (dict(soc_version="Ascend910.toml"), "unknown soc_version 'Ascend910.toml' (known: Ascend310, Ascend910, "
                                             "Ascend910B1)"),
        # kernels: block_dim against the SoC, the code's control structure
        (dict(kernels=(Kernel("k", 0, 3, b""), K1)), "kernel 0 'k' block_dim 0 outside [1, 65535] (the SoC's max_block_dim)"),
        (dict(kernels=(Kernel("k", 2**32 - 1, 3, b""), K1)),
         "kernel 0 'k' block_dim 4294967295 outside [1, 65535] (the SoC's max_block_dim)"),
        (dict(kernels=(Kernel("k", 1, 3, b"\x01\x02\x03"), K1)), "kernel 0 'k': unknown opcode 513 at byte 0"),
        (dict(kernels=(Kernel("k", 1, 3, _code(("loop_begin", dict(count=-1)), ("loop_end", {}))), K1)),
         "kernel 0 'k': instruction 0: loop_begin count -1 is negative"),
        (dict(kernels=(Kernel("k", 1, 3, _code(("loop_begin", dict(count=2)))), K1)),
         "kernel 0 'k': instruction 0: loop_begin without a matching loop_end"),
        (dict(kernels=(Kernel("k", 1, 3, _code(("block_if", dict(lo=0, hi=1)), ("loop_end", {}))), K1)),
         "kernel 0 'k': instruction 1: loop_end without a matching loop_begin inside the block_if of instruction 0"),
        (dict(kernels=(Kernel("k", 1, 3, _code(("block_endif", {}))), K1)),
         "kernel 0 'k': instruction 0: block_endif without a matching block_if"),
        (dict(kernels=(Kernel("k", 1, 3, _code(("loop_begin", dict(count=2)), ("loop_offset", dict(arg=3)),
                                              ("loop_end", {}))), K1)),
         "kernel 0 'k': instruction 1: loop_offset of kernel argument 3, the kernel takes 3"),
        (dict(kernels=(Kernel("k", 1, 3, _code(("loop_rotate", dict(space=5, size=64, copies=2, step=1)))), K1)),
         "kernel 0 'k': instruction 0: loop_rotate outside a loop_begin .. loop_end"),
        (dict(kernels=(Kernel("k", 1, 3, _code(("loop_begin", dict(count=2)),
                                              ("loop_rotate_event", dict(src_pipe=4, dst_pipe=1, copies=0, step=1)),
                                              ("loop_end", {}))), K1)),
         "kernel 0 'k': instruction 1: loop_rotate_event copies 0 (at least 1)"),
    ],
)
def test_inconsistent_tables_rejected(change, message, tmp_path):
    # the writer refuses them ...
    with pytest.raises(CannError) as e:
        write_om(replace(small_model(), **change), tmp_path / "x.om")
    assert e.value.lines() == [f"error: <model>: {BAD}{message}"]
    assert os.listdir(tmp_path) == []
    # ... and so does the reader, for a file produced by some other tool
    import cann.codegen.om as om

    orig = om.validate
    om.validate = lambda m, w: None
    try:
        data = encode_om(replace(small_model(), **change))
    finally:
        om.validate = orig
    assert _reject(data).lines() == [f"error: m.om: {BAD}{message}"]


def test_atomic_write_missing_directory(tmp_path):
    target = tmp_path / "no" / "such" / "m.om"
    with pytest.raises(CannError) as e:
        write_om(small_model(), target)
    assert e.value.diagnostics[0].location == str(target)
    assert not target.exists()
    assert os.listdir(tmp_path) == []


def test_atomic_write_failure_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "m.om"

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(CannError, match="No space left"):
        write_om(small_model(), target)
    assert os.listdir(tmp_path) == []


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "m.om"
    target.write_bytes(b"previous")
    monkeypatch.setattr(os, "replace", lambda s, d: (_ for _ in ()).throw(OSError(5, "I/O error")))
    with pytest.raises(CannError):
        write_om(small_model(), target)
    assert target.read_bytes() == b"previous"
    assert os.listdir(tmp_path) == ["m.om"]


def test_read_missing_file(tmp_path):
    with pytest.raises(CannError) as e:
        read_om(tmp_path / "missing.om")
    assert e.value.diagnostics[0].location == str(tmp_path / "missing.om")


def test_checksummed_garbage_is_rejected_cleanly():
    """Files another tool might write: valid magic, version and checksum, corrupt tables."""
    import random

    data = encode_om(small_model())
    rnd = random.Random(0)
    for _ in range(3000):
        b = bytearray(data[:-CHECKSUM_SIZE])
        for _ in range(rnd.randint(1, 4)):
            b[rnd.randrange(12, len(b))] = rnd.randrange(256)
        if rnd.random() < 0.3:
            b = b[: rnd.randrange(12, len(b))]
        body = bytes(b)
        try:
            decode_om(body + hashlib.sha256(body).digest(), "m.om")
        except CannError as e:
            assert e.diagnostics[0].location == "m.om"


@pytest.mark.parametrize("dtype", ["(", "f4", "O", "float32,int8", ""])
def test_strange_dtype_strings_rejected(dtype):
    with pytest.raises(CannError, match="unknown dtype"):
        encode_om(replace(small_model(), inputs=(IoTensor("x", (1,), dtype, 0),)))


def test_launch_work_round_trips_and_sits_in_its_own_section():
    m = small_model()
    back = decode_om(encode_om(m))
    assert [la.work for la in back.launches] == [la.work for la in m.launches]
    assert back.launches[1].work == LaunchWork()  # not given: all zero
    data = encode_om(m)
    off, size = struct.unpack_from("<QQ", data, TABLE + 5 * 16)  # section entry 5: work
    assert size == 4 + 3 * 44 and struct.unpack_from("<I", data, off)[0] == 3
    assert struct.unpack_from("<QIQQQQ", data, off + 4) == (2 ** 40 + 3, 2, 5, 6, 7, 2 ** 33)


def test_work_section_with_a_wrong_record_count_is_rejected():
    data = bytearray(encode_om(small_model()))
    off, _ = struct.unpack_from("<QQ", data, TABLE + 5 * 16)
    struct.pack_into("<I", data, off, 2)
    _reject(_with_fixed_checksum(data), "work section: expected one record per launch (3)")


def _entry(data: bytearray, i: int, off: int, size: int) -> None:
    struct.pack_into("<QQ", data, TABLE + 16 * i, off, size)


def test_corrupt_header_is_reported_as_corrupt_not_as_a_version():
    # flipping header bytes makes the version field 4294967289: the checksum tells it is corruption
    data = bytearray(encode_om(small_model()))
    for i in range(8, 40):
        data[i] ^= 0xFF
    assert _reject(bytes(data)).lines() == [
        "error: m.om: corrupt .om: checksum mismatch (file truncated or modified; its header claims format "
        "version 4294967289)"]
    # a re-signed (well-formed) file of another version is an unsupported version
    assert _reject(_with_fixed_checksum(data)).lines() == [
        "error: m.om: unsupported .om format version 4294967289 (this cann reads versions 3, 4, 5, 6)"]


@pytest.mark.parametrize("edit, message", [
    # small_model's sections: strings (144, 31), tensors (175, 155), weights (384, 600), kernels (984, 140),
    # launches (1124, 92), work (1216, 136), trailer at 1352
    (lambda d: _entry(d, 0, 113, 25), "strings section at file offset 113 (+25 bytes), expected at 144"),
    (lambda d: _entry(d, 1, 130, 108), "tensors section at file offset 130 (+108 bytes), expected at 175"),
    (lambda d: _entry(d, 2, 320, 600), "weights section at file offset 320 (+600 bytes), expected at 384"),
    (lambda d: _entry(d, 4, 1124, 2**64 - 1), f"launches section at file offset 1124 (+{2**64 - 1} bytes), expected at 1124"),
])
def test_sections_must_be_where_the_format_puts_them(edit, message):
    data = bytearray(encode_om(small_model()))
    edit(data)
    assert _reject(_with_fixed_checksum(data)).lines() == [
        f"error: m.om: corrupt .om: {message} inside [144, 1352) (docs/om-format.md)"]


@pytest.mark.parametrize("edit, message", [
    (lambda d: _entry(d, 5, 1216, 124), "12 bytes between the last section and the trailer"),
    (lambda d: d.__setitem__(379, 7), "padding before the weights section is not zero"),
])
def test_no_bytes_outside_the_sections(edit, message):
    data = bytearray(encode_om(small_model()))
    edit(data)
    assert _reject(_with_fixed_checksum(data)).lines() == [f"error: m.om: corrupt .om: {message}"]


@pytest.mark.parametrize("section, count_at, message", [
    (3, 0, "kernels section: 4294967295 kernels cannot fit in the 136 bytes left (truncated)"),
    (4, 0, "launches section: 4294967295 launches cannot fit in the 88 bytes left (truncated)"),
    (1, 0, "tensors section: 4294967295 inputs cannot fit in the 151 bytes left (truncated)"),
])
def test_record_counts_are_checked_before_looping(section, count_at, message):
    data = bytearray(encode_om(small_model()))
    off, _ = struct.unpack_from("<QQ", data, TABLE + 16 * section)
    struct.pack_into("<I", data, off + count_at, 2**32 - 1)
    assert _reject(_with_fixed_checksum(data)).lines() == [f"error: m.om: corrupt .om: {message}"]


def test_knowledge_base_digests_round_trip_and_version_3_files_still_load():
    """Format 4 records the digests of the knowledge bases a compile read (strings section); a
    version 3 file (no digests) still loads, with none."""
    from dataclasses import replace

    digests = ("shipped:" + "a" * 64, "user:" + "0" * 64)
    m = replace(small_model(), knowledge_bases=digests)
    assert decode_om(encode_om(m)).knowledge_bases == digests
    assert encode_om(m) == encode_om(replace(small_model(), knowledge_bases=digests))  # deterministic
    # the same model as version 3 wrote it: no digest count in the strings section
    v4 = bytearray(encode_om(small_model(), version=4))
    strings_off, strings_size = struct.unpack_from("<QQ", v4, 32)
    assert v4[strings_off + strings_size - 4:strings_off + strings_size] == b"\0\0\0\0"
    body = v4[:strings_off + strings_size - 4] + v4[strings_off + strings_size:-CHECKSUM_SIZE]
    struct.pack_into("<I", body, 8, 3)
    for i in range(6):  # every section table entry: sizes / offsets after the strings move 4 bytes back
        off, size = struct.unpack_from("<QQ", body, 32 + 16 * i)
        struct.pack_into("<QQ", body, 32 + 16 * i, off - 4 * (i > 0), size - 4 * (i == 0))
    # the weights section keeps its 64-byte alignment: 4 bytes of padding more before it
    w_off = struct.unpack_from("<Q", body, 64)[0] + 4
    body = body[:w_off - 4] + b"\0" * 4 + body[w_off - 4:]
    for i in range(2, 6):
        off, size = struct.unpack_from("<QQ", body, 32 + 16 * i)
        struct.pack_into("<QQ", body, 32 + 16 * i, off + 4, size)
    old = decode_om(bytes(body) + hashlib.sha256(body).digest(), "v3.om")
    assert old.knowledge_bases == () and old.kernels == small_model().kernels
    with pytest.raises(CannError, match="knowledge-base digest 'mine:1' is not"):
        encode_om(replace(small_model(), knowledge_bases=("mine:1",)))


def test_version_5_records_gm_reuse_and_the_size_without_it():
    """Format 5's header carries the flags (bit 0: GM reuse) and gm_size_no_reuse; weights and
    activations are reported apart (the weights section's size, the rest of gm_size)."""
    from cann.codegen.om import FLAG_GM_REUSE, memory_line

    m = replace(small_model(), gm_reuse=True, gm_size_no_reuse=8192)
    data = encode_om(m)
    assert struct.unpack_from("<IIQ", data, 32) == (FLAG_GM_REUSE, 0, 8192)
    back = decode_om(data)
    assert back == m and (back.weight_bytes, back.activation_bytes, back.activation_bytes_no_reuse) == \
        (600, 4096 - 600, 8192 - 600)
    assert memory_line(back) == "device memory 4096 bytes: weights 600, activations 3496 (reuse on; 7592 without)"
    assert memory_line(small_model()) == "device memory 4096 bytes: weights 600, activations 3496 (reuse off)"
    # without reuse the header repeats gm_size (read back as 0: "the same")
    assert struct.unpack_from("<IIQ", encode_om(small_model()), 32) == (0, 0, 4096)
    assert encode_om(m) == data  # deterministic


@pytest.mark.parametrize("at, value, message", [
    (32, 2, "corrupt .om: unknown header flags 0x2 (known: 0x1)"),
    (36, 1, "corrupt .om: the header's reserved field is not zero"),
])
def test_version_5_header_fields_are_checked(at, value, message):
    data = bytearray(encode_om(small_model()))
    struct.pack_into("<I", data, at, value)
    assert _reject(_with_fixed_checksum(data)).lines() == [f"error: m.om: {message}"]


def test_version_4_files_load_without_reuse_and_cannot_record_it():
    old = encode_om(small_model(), version=4)
    assert struct.unpack_from("<I", old, 8)[0] == 4 and struct.unpack_from("<Q", old, 32)[0] == 128  # table at 32
    assert decode_om(old, "v4.om") == small_model()
    with pytest.raises(CannError, match="format version 4 cannot record GM reuse"):
        encode_om(replace(small_model(), gm_reuse=True), version=4)
    with pytest.raises(CannError, match="cannot write .om format version 7"):
        encode_om(small_model(), version=7)
    with pytest.raises(CannError, match="gm_size_no_reuse 8192 differs from gm_size 4096 without GM reuse"):
        encode_om(replace(small_model(), gm_size_no_reuse=8192))


def _img2col(pitch: int) -> isa.Instr:
    return isa.make("img2col", dtype=0, dst=0, src=64, fm_c1=2, fm_h=4, fm_w=4, pad_t=1, pad_b=1, pad_l=1,
                    pad_r=1, stride_h=1, stride_w=1, kernel_h=3, kernel_w=3, dil_h=1, dil_w=1, m_start=0,
                    m_count=16, k_start=0, k_count=32, fm_c1_stride=pitch)


def test_version_5_kernels_read_img2col_as_packed_and_a_c1_pitch_cannot_be_written_to_them():
    """Versions 3 to 5 encode img2col without ``fm_c1_stride`` (8 bytes shorter): read back with 0
    (packed); writing one with a pitch as version 5 is an error naming the kernel."""
    body = [isa.make("loop_begin", count=2), _img2col(0), isa.make("loop_end")]
    packed = replace(small_model(), kernels=(Kernel("conv_0", 2, 3, isa.encode(body)), *small_model().kernels[1:]))
    v5, v6 = encode_om(packed, version=5), encode_om(packed)
    assert struct.unpack_from("<I", v5, 8)[0] == 5 and len(v6) - len(v5) == 8
    assert decode_om(v5, "v5.om") == packed == decode_om(v6)
    pitched = replace(packed, kernels=(Kernel("conv_0", 2, 3, isa.encode([_img2col(640)])), *packed.kernels[1:]))
    assert decode_om(encode_om(pitched)) == pitched
    with pytest.raises(CannError, match=r"\.om format version 5 cannot record kernel conv_0's img2col C1 "
                                        r"pitch \(fm_c1_stride\) at byte 0"):
        encode_om(pitched, version=5)
