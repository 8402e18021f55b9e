#!/usr/bin/python3
"""covflow's batched Hermitian eigensolver next to numpy.linalg.eigh.

    /usr/bin/python3 examples/heev_numpy.py [--covflow build/apps/covflow] [--device cpu|cuda|auto]

Makes 180 covariance matrices of 32 channels (one per range/Doppler cell: a few sources over
noise), has `covflow linalg heev` decompose them, and compares with numpy. covflow writes what
numpy.linalg.eigh returns — the same shapes, dtypes, ascending eigenvalues and V[..., :, k]
belonging to W[..., k] — so the comparison is two lines. Eigenvectors are compared through the
residual A V - V diag(W): each is defined only up to a phase, so they need not equal numpy's.
Exits 1 when covflow and numpy disagree.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--covflow", default="covflow", help="the covflow binary (default: covflow on PATH)")
    parser.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"])
    args = parser.parse_args()

    rng = np.random.default_rng()
    cells, channels, snapshots = 180, 32, 64
    # Snapshots: three sources at fixed angles on a half-wavelength uniform linear array, plus noise.
    angles = np.deg2rad([-20.0, 5.0, 31.0])
    steering = np.exp(1j * np.pi * np.outer(np.arange(channels), np.sin(angles)))        # (channels, 3)
    amplitudes = (rng.standard_normal((cells, 3, snapshots)) + 1j * rng.standard_normal((cells, 3, snapshots))) * 3
    noise = (rng.standard_normal((cells, channels, snapshots)) + 1j * rng.standard_normal((cells, channels, snapshots)))
    x = steering @ amplitudes + noise / np.sqrt(2)
    a = x @ np.conj(np.swapaxes(x, 1, 2)) / snapshots                                    # (180, 32, 32) complex128

    with tempfile.TemporaryDirectory() as tmp:
        a_path, w_path, v_path = (os.path.join(tmp, name) for name in ("A.npy", "W.npy", "V.npy"))
        np.save(a_path, a)
        subprocess.run([args.covflow, "linalg", "heev", a_path, "--values", w_path, "--vectors", v_path,
                        "--device", args.device], check=True)

        # The two lines:
        w, v = np.load(w_path), np.load(v_path)
        same = np.allclose(w, np.linalg.eigh(a)[0]) and np.allclose(a @ v, v * w[:, None, :])

    print(f"W {w.shape} {w.dtype}, V {v.shape} {v.dtype}")
    print(f"largest eigenvalue error vs numpy: {np.abs(w - np.linalg.eigvalsh(a)).max():.3g}")
    print(f"largest residual |A V - V diag(W)|: {np.abs(a @ v - v * w[:, None, :]).max():.3g}")
    print(f"cell 0: 3 sources stand out: {np.round(w[0, -4:], 1)}")
    print("covflow and numpy agree" if same else "covflow and numpy DISAGREE")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
