"""`rocbuild bench`: llama.cpp's llama-bench per backend built into the prefix (HIP, Vulkan,
CPU on request), measured the same way for each and reported with the host facts that move
the figures (power level, PCIe link, tuning variables).

Modules, data flowing top to bottom: ``model`` (GGUF header), ``llamabench`` (argv, output
parsing, which device really ran), ``stats`` (warm-up discarded, median and spread),
``host`` (sysfs record, VRAM use, warnings), ``runner`` (one process per run, stopped
without SIGKILL, VRAM back to idle between runs), ``published`` (reference figures),
``report`` (table, JSON, CSV) and ``chart`` (SVG).
"""
