"""``cann-opst``: generated operator tests in Huawei msopst's case format, run on the simulator.

Usage::

    cann-opst create --op Add -o add.json            # a starting case file from the ONNX schema
    cann-opst run add.json --out st_out              # expand, run, compare; st_out/st_report.json
    cann-opst run add.json -c Test_Add_001 --precision_mode must_keep_origin_dtype

``run`` exits 0 when every sub-case's status is its ``expect`` (default "success"), 1 when one is
not, 2 on bad input (one line naming the file and field). See docs/opst.md.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from cann.errors import CannError
from cann.fileio import atomic_output
from cann.hw.config import available_socs
from cann.opst.cases import expand_file
from cann.options import validate_options
from cann.opst.create import create_case
from cann.opst.run import report, run_case, summary_table, write_report
from cann.tools._cli import run_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli():
    """Generated operator tests (msopst's JSON case format) on the simulated AI Core."""


@cli.command()
@click.option("--op", "op_type", required=True, metavar="OP", help="ONNX operator type (Add, Conv, ...).")
@click.option("-o", "--output", metavar="PATH", help="Case file to write (default <Op>_case.json).")
@click.option("--opset", type=int, help="ONNX opset of the schema (default: the newest).")
def create(op_type, output, opset):
    """Write a starting case file for OP from its ONNX schema."""
    content = create_case(op_type, opset)
    path = Path(output or f"{op_type}_case.json")
    text = json.dumps(content, indent=4)
    # one line per list of scalars (a shape, a range, a type list), as msopst's own examples
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + re.sub(r"\s*\n\s*", " ", m.group(1)) + "]", text)
    with atomic_output(path) as f:
        f.write(text + "\n")
    click.echo(f"wrote {path}")


@cli.command()
@click.argument("case_files", nargs=-1, required=True, metavar="CASE.json...")
@click.option("--out", "out_dir", metavar="DIR", default="st_out", show_default=True,
              help="Output folder: st_report.json and the data of every sub-case.")
@click.option("-c", "--case_name", "case_names", multiple=True, metavar="NAME", help="Run only these cases.")
@click.option("--soc", "--soc_version", "soc_version", metavar="NAME",
              help=f"Target SoC: {', '.join(available_socs())}.")
@click.option("--precision_mode", metavar="MODE", help="As cann-compile (default force_fp16).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generated inputs.")
@click.option("--expand-only", is_flag=True, help="Print the expanded sub-case names and stop.")
def run(case_files, out_dir, case_names, soc_version, precision_mode, seed, expand_only):
    """Expand, run and compare the cases of CASE.json files."""
    validate_options(soc_version=soc_version, precision_mode=precision_mode)
    cases = []
    for f in case_files:
        cases += expand_file(f, list(case_names) or None)
    if expand_only:
        for c in cases:
            click.echo(c["case_name"])
        click.echo(f"{len(cases)} sub-cases")
        return 0
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CannError("--out", f"cannot create {out}: {e.strerror}") from None
    results = [run_case(c, seed=seed, soc_version=soc_version, precision_mode=precision_mode,
                        data_dir=out / "data") for c in cases]
    cmd = "cann-opst " + " ".join(shlex.quote(a) for a in _ARGV)
    write_report(out / "st_report.json", report(results, cmd))
    click.echo(summary_table(results))
    click.echo(f"report: {out / 'st_report.json'}")
    return 0 if all(r.ok for r in results) else 1


_ARGV: list[str] = []  # the command line, for st_report.json's run_cmd


def main(argv: Sequence[str] | None = None):
    _ARGV[:] = list(argv) if argv is not None else sys.argv[1:]
    run_command(cli, argv, "cann-opst")


if __name__ == "__main__":
    main()
