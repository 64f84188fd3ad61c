"""Job counts rocbuild chooses on modelled hosts, next to what `-j$(nproc)` would need.

For a 16-core/32 GiB and an 8-core/16 GiB machine (available memory = 90 % of RAM, as on an
idle desktop; swap as given), prints for LLVM compile and link and for rocBLAS' Tensile the
jobs rocbuild picks from the shipped recipes' memory-per-job figures, and the memory that
`-j$(nproc)` would ask for, with the ratio to what the host can give.

    python -m perf.jobs
"""

from __future__ import annotations

from pathlib import Path

from rocbuild.model.recipes import load_recipes
from rocbuild.model.resources import GIB, HostSnapshot, jobs_by_kind

HOSTS = (("16 cores / 32 GiB RAM / 8 GiB swap", 16, 32, 8),
         ("8 cores / 16 GiB RAM / 4 GiB swap", 8, 16, 4))
WORK = (("llvm", "compile", "compile_mem"), ("llvm", "link", "link_mem"),
        ("rocblas", "tensile", "tensile_mem"), ("rocblas", "compile", "compile_mem"))


def main() -> int:
    recipes = load_recipes(Path(__file__).resolve().parents[1] / "recipes").recipes
    for label, cpus, ram, swap in HOSTS:
        host = HostSnapshot(cpus=cpus, cpu_reason=f"{cpus} CPUs",
                            mem_available=int(ram * 0.9 * GIB), swap_free=swap * GIB,
                            mem_reason="memory")
        budget = host.mem_available + host.swap_free * 0.5
        print(f"\n{label}: budget {budget / GIB:.1f} GiB (available + swap × 0.5)")
        print(f"  {'work':<18}{'per job':>9}{'rocbuild':>10}{'needs':>9}   "
              f"{'-j' + str(cpus) + ' needs':>12}{'× budget':>10}")
        for component, kind, key in WORK:
            resources = recipes[component].resources
            per_job = int(resources.get(key, resources["compile_mem"]))
            chosen = jobs_by_kind(resources, host, swap_weight=0.5, cap=None)[kind].jobs
            naive = cpus * per_job
            print(f"  {component + ' ' + kind:<18}{per_job / GIB:>7.1f}G{chosen:>10}"
                  f"{chosen * per_job / GIB:>8.1f}G   {naive / GIB:>11.1f}G"
                  f"{naive / budget:>10.2f}")
        llvm = jobs_by_kind(recipes["llvm"].resources, host, swap_weight=0.5, cap=None)
        res = recipes["llvm"].resources
        both = llvm["compile"].jobs * res["compile_mem"] + llvm["link"].jobs * res["link_mem"]
        naive_both = cpus * res["link_mem"]  # -j$(nproc) at the end of an LLVM build: all links
        print(f"  {'llvm pools at once':<18}{'':>9}{'':>10}{both / GIB:>8.1f}G   "
              f"{naive_both / GIB:>11.1f}G{naive_both / budget:>10.2f}")
    print("\n'× budget' over 1.00 means -j$(nproc) asks for more memory than the host can "
          "give: the OOM killer ends the build.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
