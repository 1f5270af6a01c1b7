"""Regenerate the Python stubs of proto/ into their single home, clients/src/strom/protocol/v1.

Usage: python proto/generate.py [--out DIR]

The .proto tree mirrors the import path (proto/strom/protocol/v1/*.proto -> strom.protocol.v1),
so generated imports need no rewriting. Writes *_pb2.py and *_pb2.pyi for every file, and
*_pb2_grpc.py only for files that define services. The generator is grpcio-tools, pinned in
constraints.txt; tests/unit/strom/protocol/test_stubs_fresh.py fails when the committed stubs
differ from a fresh run of this script.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
PACKAGE_DIR = Path("strom", "protocol", "v1")
DEFAULT_OUT = PROTO_ROOT.parent / "clients" / "src"
INIT_TEXT = '"""Generated protocol stubs of strom.protocol.v1 (from proto/; do not edit)."""\n'


def _run_protoc(args: list[str]) -> None:
    from grpc_tools import protoc

    include = str(Path(protoc.__file__).parent / "_proto")
    code = protoc.main(["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{include}", *args])
    if code != 0:
        sys.exit(f"protoc failed with exit code {code} for {args[-1]}")


def generate(out_root: Path) -> list[Path]:
    """Generate every stub under ``out_root`` (a src directory); returns the files written."""
    sources = sorted((PROTO_ROOT / PACKAGE_DIR).glob("*.proto"))
    if not sources:
        sys.exit(f"no .proto files under {PROTO_ROOT / PACKAGE_DIR}")
    with tempfile.TemporaryDirectory() as tmp:
        for source in sources:
            relative = str(source.relative_to(PROTO_ROOT))
            _run_protoc([f"--python_out={tmp}", f"--pyi_out={tmp}", relative])
            if "\nservice " in source.read_text():
                _run_protoc([f"--grpc_python_out={tmp}", relative])
        target = out_root / PACKAGE_DIR
        if target.exists():
            for old in target.glob("*_pb2*"):
                old.unlink()
        target.mkdir(parents=True, exist_ok=True)
        written = []
        for produced in sorted((Path(tmp) / PACKAGE_DIR).iterdir()):
            shutil.copyfile(produced, target / produced.name)
            written.append(target / produced.name)
    (target / "__init__.py").write_text(INIT_TEXT)
    parent_init = out_root / "strom" / "protocol" / "__init__.py"
    parent_init.write_text('"""Versioned protocol packages (generated stubs live in v1)."""\n')
    return [*written, target / "__init__.py", parent_init]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="src root to write into")
    args = parser.parse_args()
    for path in generate(args.out):
        print(path)


if __name__ == "__main__":
    main()
