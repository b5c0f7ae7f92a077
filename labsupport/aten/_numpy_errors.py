"""Silence numpy's floating-point RuntimeWarnings raised *inside the lab's ATen code*.

torch never warns when ``3e38 * 10`` overflows to inf, ``inf - inf`` gives nan or nan is cast to an
integer; numpy does. ``np.errstate`` would cost about 1 us per kernel call, so instead a warnings
filter is installed once, limited to warnings attributed to ``labsupport.aten`` modules (numpy
attributes them to the Python function that called it). Note: running pytest with ``-W error``
puts an "error" filter in front of this one.
"""

from __future__ import annotations

import warnings

warnings.filterwarnings(
    "ignore",
    message=r"(overflow|invalid value|divide by zero|underflow) encountered",
    category=RuntimeWarning,
    module=r"labsupport\.aten(\.|$)",
)
