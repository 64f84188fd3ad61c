"""rocbuild: build the ROCm 6.4 stack and llama.cpp from source for a chosen GPU target."""

__version__ = "0.1.0"
