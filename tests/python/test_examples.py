"""The Python example runs and passes its own check against a float64 computation, on the CPU
backend and, where a device is usable, on the CUDA kernels."""
import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "sparse_decode.py"


def test_python_sparse_decode_example(device):  # conftest's fixture: cpu, and cuda where usable
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--device", device], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{EXAMPLE.name} --device {device} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "ok:" in proc.stdout
