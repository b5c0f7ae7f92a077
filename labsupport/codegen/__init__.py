"""The code generator: ops.yaml -> readable Python files under build/<name>/ (torchgen in miniature).

``load_build(ops_yaml, name)`` builds if needed and imports the result with its own dispatcher;
``python -m labsupport.codegen [ops.yaml] [--name NAME] [--out DIR]`` only writes the files.
"""

from labsupport.codegen.build import load_build, write_build
from labsupport.codegen.model import OpsYamlError, load_ops_yaml

__all__ = ["OpsYamlError", "load_build", "load_ops_yaml", "write_build"]
