"""bench/variant_build.sh: a variant's folder name and flags, and the prebuilt folders' check (a
folder built here is taken on the device only when built from the same sources and loadable)."""
import pathlib
import shutil
import subprocess
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HELPERS = ROOT / "bench" / "variant_build.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("xz") is None, reason="needs bash and xz")


def sh(script, cwd=ROOT):
    return subprocess.run(["bash", "-c", f"source {HELPERS}; {script}"], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_names_and_flags():
    p = sh('TL=; dir 0; dir SMLA_SD_TAIL_SPLIT=1; define 7; define SMLA_SD_A=0+SMLA_SD_B=2; '
           'TL=-DSMLA_SD_TIMELINE=3; dir SMLA_SD_TAIL_SPLIT=1')
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:5] == ["build-v0", "build-vSMLA_SD_TAIL_SPLIT_1", "-DSMLA_SD_VARIANT=7",
                                        "-DSMLA_SD_A=0 -DSMLA_SD_B=2", "build-tl3-vSMLA_SD_TAIL_SPLIT_1"]


def fake_tree(root):
    """A source tree with one CUDA file and a prebuilt build-v0 whose CLI is a script."""
    (root / "src").mkdir(parents=True)
    (root / "src" / "k.cu").write_text("// kernel\n")
    (root / "CMakeLists.txt").write_text("project(x)\n")
    for d in ("cmake", "include", "tests", "tools"):
        (root / d).mkdir()
    stamp = sh("source_stamp", cwd=root).stdout.strip()
    stage = root / "stage" / "build-v0"
    (stage / "tools").mkdir(parents=True)
    (stage / "SOURCE_STAMP").write_text(stamp + "\n")
    cli = stage / "tools" / "smla"
    cli.write_text("#!/bin/sh\nexit 0\n")
    cli.chmod(0o755)
    (root / ".gpu" / "prebuilt").mkdir(parents=True)
    with tarfile.open(root / ".gpu" / "prebuilt" / "build-v0.tar.xz", "w:xz") as t:
        t.add(stage, arcname="build-v0")
    return stamp


def test_prebuilt_taken_only_from_the_same_sources(tmp_path):
    stamp = fake_tree(tmp_path)
    assert len(stamp) == 16 and all(c in "0123456789abcdef" for c in stamp)
    p = sh("TL=; unpack_prebuilt 0 smla_cli && echo taken", cwd=tmp_path)
    assert p.stdout.strip() == "taken", p.stderr
    assert (tmp_path / "build-v0" / "tools" / "smla").exists()
    # a folder without the test suite is not taken where tests are asked for
    p = sh('TL=; unpack_prebuilt 0 "smla_cli smla_gpu_tests" || echo build', cwd=tmp_path)
    assert p.stdout.strip() == "build" and "no test suite" in p.stderr
    # nor once a source changed
    (tmp_path / "src" / "k.cu").write_text("// kernel, changed\n")
    p = sh("TL=; unpack_prebuilt 0 smla_cli || echo build", cwd=tmp_path)
    assert p.stdout.strip() == "build" and "this tree is" in p.stderr
    # nor a variant with no folder
    p = sh("TL=; unpack_prebuilt 3 smla_cli || echo build", cwd=tmp_path)
    assert p.stdout.strip() == "build"
