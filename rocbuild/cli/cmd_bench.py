"""`rocbuild bench MODEL.gguf`: llama-bench for each backend built into the prefix (HIP,
Vulkan; CPU on request), same settings, one process each, reported with the host facts.
Exit 0 when every run gave a figure, 1 when one failed, found no device or would not exit,
2 for bad input."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.markup import escape

from rocbuild.bench import chart, llamabench, report
from rocbuild.bench.host import read_host
from rocbuild.bench.llamabench import BenchSettings
from rocbuild.bench.model import read_model
from rocbuild.bench.runner import Limits
from rocbuild.bench.session import choose_binaries, run_session
from rocbuild.cli.argerrors import path_arg
from rocbuild.cli.ui import console, print_json
from rocbuild.errors import ConfigError, notice
from rocbuild.files import write_text_atomic
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import Settings
from rocbuild.prefix.buildinfo import read_build_info


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{value} must be {least} or more")
    return value


def _positive(text: str) -> int:
    return _whole(text, 1)


def _not_negative(text: str) -> int:
    return _whole(text, 0)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0")
    return value


def _backends(text: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in llamabench.BACKENDS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown backend '{', '.join(bad) or text}' (known: {', '.join(llamabench.BACKENDS)})")
    return list(dict.fromkeys(names))


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "bench", parents=parents, help="llama-bench HIP against Vulkan (and CPU) on this GPU",
        description="Run the prefix's llama-bench for each backend built (HIP: bin/, Vulkan: "
                    "llama.cpp-vulkan/bin/), same settings, one process each: one warm-up "
                    "repetition discarded, then the median and spread of N from samples_ts. "
                    "Between runs it waits for the GPU's VRAM use to return to idle; a run is "
                    "stopped with SIGINT then SIGTERM, never SIGKILL. Figures count only when "
                    "the run's own output names the GPU device.")
    parser.add_argument("model", type=path_arg, metavar="MODEL.gguf", help="the model to run")
    parser.add_argument("--backends", type=_backends, default=None, metavar="LIST",
                        help="comma-separated: hip, vulkan, cpu (default: each GPU backend "
                             "built in the prefix)")
    parser.add_argument("--cpu", action="store_true", help="also run on the CPU alone")
    parser.add_argument("-p", "--prompt", type=_positive, default=512, metavar="N",
                        help="prompt tokens of the pp test (default 512)")
    parser.add_argument("-n", "--gen", type=_positive, default=128, metavar="N",
                        help="generated tokens of the tg test (default 128)")
    parser.add_argument("--ngl", type=_not_negative, default=99, metavar="N",
                        help="layers on the GPU (default 99: all)")
    parser.add_argument("-fa", "--flash-attn", action="store_true",
                        help="flash attention on (llama-bench -fa 1)")
    parser.add_argument("-b", "--batch", type=_positive, default=None, metavar="N",
                        help="logical batch size (llama-bench default 2048)")
    parser.add_argument("-ub", "--ubatch", type=_positive, default=None, metavar="N",
                        help="physical batch size (llama-bench default 512)")
    parser.add_argument("-d", "--depth", type=_not_negative, default=0, metavar="N",
                        help="context depth: tokens in the KV cache before each test")
    parser.add_argument("-r", "--repetitions", type=_positive, default=5, metavar="N",
                        help="measured repetitions per test (default 5; one more is run first "
                             "and discarded)")
    parser.add_argument("-t", "--threads", type=_positive, default=None, metavar="N",
                        help="CPU threads (llama-bench's default otherwise)")
    parser.add_argument("--tune", action="store_true",
                        help="HIP: compare runs without and with each runtime variable of "
                             "`rocbuild env --tune`, alone and all together")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--csv", type=path_arg, metavar="FILE", help="write the figures as CSV")
    parser.add_argument("--chart", type=path_arg, metavar="FILE.svg",
                        help="write a bar chart (SVG) of the figures with their spread")
    parser.add_argument("--vram-timeout", type=_seconds, default=60.0, metavar="SECONDS",
                        help="longest wait for VRAM use to return to idle between runs "
                             "(default 60)")
    parser.add_argument("--timeout", type=_seconds, default=3600.0, metavar="SECONDS",
                        help="time limit of one llama-bench run (default 3600)")
    parser.add_argument("--stop-grace", type=_seconds, default=30.0, metavar="SECONDS",
                        help="wait after SIGINT, and again after SIGTERM (default 30)")
    parser.add_argument("--gpu-root", type=path_arg, metavar="DIR", default=Path("/"),
                        help="read /sys below DIR (default: /)")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.chart is not None and args.chart.suffix.lower() != ".svg":
        raise ConfigError(f"--chart {args.chart}: the chart is written as SVG",
                          tip="give a file name ending in .svg")
    model = read_model(args.model)
    prefix = settings.prefix or load_stack(settings).prefix
    binaries = choose_binaries(prefix, args.backends, args.cpu)
    if args.tune and "hip" not in binaries:
        raise ConfigError("--tune compares HIP runtime variables, but the HIP backend is not "
                          "among the runs", tip="add hip to --backends (rocbuild build "
                          "llama.cpp first if it is not built)")
    bench_settings = BenchSettings(prompt=args.prompt, gen=args.gen, ngl=args.ngl,
                                   flash_attn=args.flash_attn, batch=args.batch,
                                   ubatch=args.ubatch, depth=args.depth,
                                   repetitions=args.repetitions, threads=args.threads)
    host = read_host(args.gpu_root, os.environ, read_build_info(prefix))
    if host.gpu is None:
        asked_cpu = "cpu" in binaries
        notice("rocbuild bench: no AMD GPU found (no KFD GPU node, no card bound to amdgpu); "
               + ("running the CPU only" if asked_cpu else "the GPU backends cannot run"))
        if not asked_cpu:
            raise ConfigError("nothing to measure without a GPU",
                              tip="add --cpu to measure llama.cpp on the CPU alone")
    result = run_session(model, bench_settings, host, prefix, binaries, tune=args.tune,
                         limits=Limits(run_timeout=args.timeout, stop_grace=args.stop_grace),
                         vram_timeout=args.vram_timeout, echo=notice)
    if args.csv is not None:
        write_text_atomic(args.csv, report.to_csv(result))
    if args.chart is not None:
        write_text_atomic(args.chart, chart.render_svg(result))
    if args.json:
        print_json(result.to_json())
    else:
        report.print_report(result, console())
        for path in (args.csv, args.chart):
            if path is not None:
                console().print(f"wrote {escape(str(path))}")
    return 0 if result.ok else 1
