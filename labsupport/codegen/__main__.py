"""``python -m labsupport.codegen [ops.yaml] [--name NAME] [--out DIR] [--force]``: write a build."""

from __future__ import annotations

import argparse
import sys

from labsupport.codegen.build import DEFAULT_OPS_YAML, write_build
from labsupport.codegen.model import OpsYamlError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labsupport.codegen", description=__doc__)
    parser.add_argument("ops_yaml", nargs="?", default=str(DEFAULT_OPS_YAML))
    parser.add_argument("--name", default="torch", help="build name (folder under build/)")
    parser.add_argument("--out", default=None, help="output folder (default build/<name>)")
    parser.add_argument("--force", action="store_true", help="regenerate even if nothing changed")
    args = parser.parse_args(argv)
    try:
        folder = write_build(args.ops_yaml, args.name, out_dir=args.out, force=args.force)
    except OpsYamlError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
