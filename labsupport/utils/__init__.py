"""Helpers shared by the generated Python bindings (stands for torch/csrc/utils)."""
