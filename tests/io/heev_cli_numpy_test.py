#!/usr/bin/python3
"""End to end: `covflow linalg heev` against numpy.linalg.eigh, with numpy writing the inputs and
reading the outputs.

usage: heev_cli_numpy_test.py PATH/TO/covflow

Needs numpy (Debian's python3-numpy, so run it with /usr/bin/python3: a pyenv `python3` on PATH may
lack it). Without numpy it prints SKIPPED and exits 77, which CTest reports as skipped.

What is checked, for complex128, complex64, float64 and float32, UPLO L and U, (batch, n, n) and
(n, n) inputs, random spectra, and clustered and graded ones for n ≥ 8:
  * W and V have exactly the shapes and dtypes numpy.linalg.eigh returns;
  * |W - W_numpy| <= 10 n eps ||A||_2 (eigenvalues are unique, so they are compared directly);
  * eigenvectors, defined only up to a phase, by the residual ||A V - V diag(W)||_F / ||A||_F and
    the orthogonality ||V^H V - I||_F, both <= 10 n eps;
  * the stored triangle is the one numpy reads: the other triangle holds unrelated numbers and the
    diagonal an imaginary part, both of which numpy ignores;
  * inputs numpy can write in other ways (Fortran order, big-endian, format versions 2.0 and 3.0)
    give the same results, and every output file is byte for byte what numpy.save writes for it;
  * a matrix with a NaN gives exit code 7, is named on stderr and is NaN in the output while the
    others are right; usage, shape, dtype and missing-file errors give their exit codes;
  * `covflow linalg cholupdate` on factors numpy.linalg.cholesky wrote, for every dtype and for
    (batch, n, n) and (n, n): ||L2 L2^H - (L L^H +- V V^H)||_F / ||L L^H +- V V^H||_F <= 10 n eps,
    zeros above the diagonal, agreement with numpy.linalg.cholesky of L L^H +- V V^H within
    20 n eps kappa_2, the downdate of chol(B + V V^H) by V giving back chol(B), and a downdate that
    loses positive definiteness in one matrix giving exit code 7 with that matrix NaN.
Inputs are drawn from a fresh seed, printed; COVFLOW_TEST_SEED=N replays one.
"""
import io
import os
import secrets
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as error:
    print(f"SKIPPED: numpy is not importable by {sys.executable} ({error}); install python3-numpy")
    sys.exit(77)

# Exit codes, as apps/common/exit_codes.hpp defines them.
OK, INTERNAL, USAGE, INPUT, IO, DEVICE, NUMERICAL = 0, 1, 2, 4, 5, 6, 7

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAIL: {what}")
    return condition


def run(covflow, *args):
    result = subprocess.run([covflow, *map(str, args)], capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr


def effective(a, uplo):
    """The Hermitian matrices numpy.linalg.eigh decomposes: the UPLO triangle, its mirror
    conjugated, the diagonal's imaginary part dropped; in double precision."""
    a = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)
    tri = np.tril(a) if uplo == "L" else np.triu(a)
    strict = np.tril(a, -1) if uplo == "L" else np.triu(a, 1)
    h = tri + np.conj(np.swapaxes(strict, -1, -2))
    diag = np.real(np.diagonal(h, axis1=-2, axis2=-1))
    idx = np.arange(a.shape[-1])
    h[..., idx, idx] = diag
    return h


def hermitian_with_spectrum(rng, batch, n, spectrum, complex_):
    """Q diag(spectrum) Q^H with a random unitary (orthogonal) Q per matrix."""
    shape = (batch, n, n)
    x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)
    q, _ = np.linalg.qr(x)
    return (q * spectrum[:, None, :]) @ np.conj(np.swapaxes(q, -1, -2))


def make_input(rng, kind, batch, n, dtype, uplo):
    complex_ = np.issubdtype(dtype, np.complexfloating)
    if kind == "random":
        spectrum = None
    elif kind == "clustered":  # repeated eigenvalues: eigenvectors not unique, residual still defined
        spectrum = np.repeat(np.array([[1.0, 1.0, 1.0, 2.0, 5.0][k % 5] for k in range(n)])[None, :], batch, 0)
    else:  # graded from 1e-6 (float32) or 1e-12 up to 1
        low = -6 if dtype in (np.float32, np.complex64) else -12
        spectrum = np.repeat(np.logspace(low, 0, n)[None, :], batch, 0)
    shape = (batch, n, n)
    # The stored array: unrelated numbers everywhere (and an imaginary diagonal), then the triangle
    # numpy will read overwritten with the intended matrix's.
    a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)
    if spectrum is not None:
        h = hermitian_with_spectrum(rng, batch, n, spectrum, complex_)
        mask = np.tril(np.ones((n, n), bool)) if uplo == "L" else np.triu(np.ones((n, n), bool))
        a = np.where(mask, h, a)
    return a.astype(dtype)


def save_variant(path, a, variant):
    if variant == "C":
        np.save(path, a)
    elif variant == "F":
        np.save(path, np.asfortranarray(a))
    elif variant == "big-endian":
        np.save(path, a.astype(a.dtype.newbyteorder(">")))
    else:  # "v2.0" / "v3.0"
        with open(path, "wb") as f:
            np.lib.format.write_array(f, a, version=(int(variant[1]), 0))


def numpy_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def check_heev_case(covflow, tmp, rng, dtype, uplo, kind, shape, variant):
    batched = len(shape) == 3
    batch, n = (shape[0] if batched else 1), shape[-1]
    a = make_input(rng, kind, batch, n, dtype, uplo)
    if not batched:
        a = a[0]
    name = f"{np.dtype(dtype).name} uplo={uplo} {kind} {shape} {variant}"
    a_path, w_path, v_path = (os.path.join(tmp, f) for f in ("a.npy", "w.npy", "v.npy"))
    save_variant(a_path, a, variant)

    code, out, err = run(covflow, "linalg", "heev", a_path, "--values", w_path, "--vectors", v_path,
                         "--device", "cpu", "--uplo", uplo)
    if not check(code == OK, f"{name}: exit {code}: {err.strip()}"):
        return
    w, v = np.load(w_path), np.load(v_path)
    w_np, v_np = np.linalg.eigh(a, UPLO=uplo)
    check(w.shape == w_np.shape and w.dtype == w_np.dtype, f"{name}: W is {w.shape} {w.dtype}, numpy {w_np.shape} {w_np.dtype}")
    check(v.shape == v_np.shape and v.dtype == v_np.dtype, f"{name}: V is {v.shape} {v.dtype}, numpy {v_np.shape} {v_np.dtype}")
    check(open(w_path, "rb").read() == numpy_bytes(w), f"{name}: W.npy differs from numpy.save's bytes")
    check(open(v_path, "rb").read() == numpy_bytes(v), f"{name}: V.npy differs from numpy.save's bytes")

    eps = np.finfo(dtype).eps
    tol = 10 * n * eps
    h = effective(a, uplo).reshape(batch, n, n)
    w64, v64 = w.astype(np.float64).reshape(batch, n), v.astype(np.complex128).reshape(batch, n, n)
    w_np64 = w_np.astype(np.float64).reshape(batch, n)
    norm2 = np.abs(w_np64).max(axis=1)  # ||A||_2 of each matrix
    value_error = (np.abs(w64 - w_np64).max(axis=1) / np.maximum(norm2, np.finfo(float).tiny)).max()
    residual = (np.linalg.norm(h @ v64 - v64 * w64[:, None, :], axis=(1, 2)) /
                np.maximum(np.linalg.norm(h, axis=(1, 2)), np.finfo(float).tiny)).max()
    orthogonality = np.linalg.norm(np.conj(np.swapaxes(v64, 1, 2)) @ v64 - np.eye(n), axis=(1, 2)).max()
    ascending = bool(np.all(np.diff(w64, axis=1) >= 0))
    check(value_error <= tol, f"{name}: eigenvalue error {value_error:.3g} ||A||_2 > {tol:.3g}")
    check(residual <= tol, f"{name}: residual {residual:.3g} > {tol:.3g}")
    check(orthogonality <= tol, f"{name}: orthogonality {orthogonality:.3g} > {tol:.3g}")
    check(ascending, f"{name}: eigenvalues not ascending")
    print(f"ok   {name:58s} eig err {value_error / eps:6.2f} eps  residual {residual / eps:6.2f} eps  "
          f"orth {orthogonality / eps:6.2f} eps  (tol {tol / eps:.0f} eps)")


def check_values_only(covflow, tmp, rng):
    a = make_input(rng, "random", 4, 12, np.complex128, "L")
    a_path, w_path, v_path = (os.path.join(tmp, f) for f in ("vo.npy", "vo_w.npy", "vo_v.npy"))
    np.save(a_path, a)
    code, _, err = run(covflow, "linalg", "heev", a_path, "--values", w_path, "--device", "cpu")
    if check(code == OK, f"values only: exit {code}: {err.strip()}"):
        w, w_np = np.load(w_path), np.linalg.eigvalsh(a)
        tol = 10 * 12 * np.finfo(np.float64).eps * np.abs(w_np).max()
        check(np.abs(w - w_np).max() <= tol, "values only: eigenvalues differ from numpy.linalg.eigvalsh")
        check(not os.path.exists(v_path), "values only: a vectors file was written")


def check_non_finite(covflow, tmp, rng):
    a = make_input(rng, "random", 6, 5, np.complex128, "L")
    a[3, 4, 1] = np.nan      # lower triangle of matrix 3: read with UPLO L
    a[1, 0, 3] = np.inf      # upper triangle of matrix 1: never read with UPLO L
    a_path, w_path, v_path = (os.path.join(tmp, f) for f in ("nan.npy", "nan_w.npy", "nan_v.npy"))
    np.save(a_path, a)
    code, _, err = run(covflow, "linalg", "heev", a_path, "--values", w_path, "--vectors", v_path, "--device", "cpu")
    check(code == NUMERICAL, f"non-finite: exit {code}, expected {NUMERICAL}")
    check("matrix 3 (NaN or Inf in the lower triangle)" in err and "1 of 6 matrices failed" in err,
          f"non-finite: stderr does not name matrix 3: {err.strip()}")
    w, v = np.load(w_path), np.load(v_path)
    check(np.all(np.isnan(w[3])) and np.all(np.isnan(v[3])), "non-finite: matrix 3 is not NaN in the output")
    good = [0, 1, 2, 4, 5]
    w_np = np.linalg.eigvalsh(a[good], UPLO="L")
    check(np.abs(w[good] - w_np).max() <= 10 * 5 * np.finfo(float).eps * np.abs(w_np).max(),
          "non-finite: the other matrices' eigenvalues are wrong")


def check_errors(covflow, tmp):
    def path(name):
        return os.path.join(tmp, name)
    np.save(path("rect.npy"), np.zeros((2, 3, 4)))
    np.save(path("int.npy"), np.zeros((3, 3), np.int32))
    np.save(path("rank4.npy"), np.zeros((1, 2, 2, 2)))
    np.save(path("ok.npy"), np.eye(3))
    with open(path("ok.npy"), "rb") as f:
        data = f.read()
    with open(path("short.npy"), "wb") as f:
        f.write(data[:-8])
    cases = [
        ("no arguments", ["linalg", "heev"], USAGE, ""),
        ("bad uplo", ["linalg", "heev", path("ok.npy"), "--values", path("w.npy"), "--uplo", "X"], USAGE, ""),
        ("no --values", ["linalg", "heev", path("ok.npy")], USAGE, "--values"),
        ("non-square", ["linalg", "heev", path("rect.npy"), "--values", path("w.npy")], INPUT, "must be square"),
        ("int32", ["linalg", "heev", path("int.npy"), "--values", path("w.npy")], INPUT, "unsupported dtype '<i4' (int32)"),
        ("rank 4", ["linalg", "heev", path("rank4.npy"), "--values", path("w.npy")], INPUT, "(4 dimensions)"),
        ("truncated", ["linalg", "heev", path("short.npy"), "--values", path("w.npy")], INPUT, "but only 64 bytes follow the header"),
        ("missing", ["linalg", "heev", path("absent.npy"), "--values", path("w.npy")], IO, "cannot open"),
        ("unwritable", ["linalg", "heev", path("ok.npy"), "--values", path("no/such/dir/w.npy")], IO, "cannot create"),
    ]
    for name, args, expected, phrase in cases:
        code, _, err = run(covflow, *args)
        check(code == expected, f"{name}: exit {code}, expected {expected}: {err.strip()}")
        check(phrase in err, f"{name}: stderr lacks {phrase!r}: {err.strip()}")
    code, _, err = run(covflow, "linalg", "heev", path("ok.npy"), "--values", path("w.npy"), "--device", "cuda")
    check(code in (OK, DEVICE), f"--device cuda: exit {code}: {err.strip()}")
    check(code == OK or "--device cuda" in err, f"--device cuda: unclear message: {err.strip()}")

    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 4))
    factors = np.linalg.cholesky(x @ np.swapaxes(x, 1, 2) + 4 * np.eye(4))
    np.save(path("L.npy"), factors)
    np.save(path("Vbad.npy"), rng.standard_normal((2, 4, 2)))
    code, _, err = run(covflow, "linalg", "cholupdate", path("L.npy"), path("Vbad.npy"), "--sign", "+", "--out", path("L2.npy"))
    check(code == INPUT, f"cholupdate with mismatched batch: exit {code}: {err.strip()}")


def check_cholupdate(covflow, tmp, rng):
    """covflow linalg cholupdate against numpy.linalg.cholesky of L L^H +- V V^H, per dtype and
    for (batch, n, n) and (n, n) inputs; then a downdate that must fail in one matrix."""
    def path(name):
        return os.path.join(tmp, name)
    for dtype in (np.complex128, np.complex64, np.float64, np.float32):
        complex_ = np.issubdtype(dtype, np.complexfloating)
        eps = np.finfo(dtype).eps
        for batch, n, k in ((4, 16, 3), (None, 40, 1), (2, 300, 4)):
            shape = (batch or 1, n, n)
            x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)
            a = x @ np.conj(np.swapaxes(x, 1, 2)) / n + np.eye(n)           # well conditioned
            v = (rng.standard_normal((shape[0], n, k)) + (1j * rng.standard_normal((shape[0], n, k)) if complex_ else 0)) / np.sqrt(n)
            b_factor = np.linalg.cholesky(a).astype(dtype)
            factor = np.linalg.cholesky(a + v @ np.conj(np.swapaxes(v, 1, 2))).astype(dtype)  # A = B + V V^H
            v = v.astype(dtype)
            if batch is None:
                factor, b_factor, v = factor[0], b_factor[0], v[0]
            np.save(path("cL.npy"), factor)
            np.save(path("cV.npy"), v)
            name = f"cholupdate {np.dtype(dtype).name} {factor.shape} k={k}"
            for sign in ("+", "-"):
                code, _, err = run(covflow, "linalg", "cholupdate", path("cL.npy"), path("cV.npy"), "--sign", sign,
                                   "--out", path("cL2.npy"), "--device", "cpu")
                if not check(code == OK, f"{name} {sign}: exit {code}: {err.strip()}"):
                    continue
                out = np.load(path("cL2.npy"))
                check(out.shape == factor.shape and out.dtype == factor.dtype, f"{name} {sign}: output {out.shape} {out.dtype}")
                check(open(path("cL2.npy"), "rb").read() == numpy_bytes(out), f"{name} {sign}: bytes differ from numpy.save's")
                l64 = factor.astype(np.complex128)
                v64 = v.astype(np.complex128)
                s = 1.0 if sign == "+" else -1.0
                target = l64 @ np.conj(np.swapaxes(l64, -1, -2)) + s * (v64 @ np.conj(np.swapaxes(v64, -1, -2)))
                o64 = out.astype(np.complex128)
                residual = (np.linalg.norm(o64 @ np.conj(np.swapaxes(o64, -1, -2)) - target, axis=(-2, -1)) /
                            np.linalg.norm(target, axis=(-2, -1))).max()
                check(residual <= 10 * n * eps, f"{name} {sign}: reconstruction {residual / eps:.2f} eps > 10 n eps")
                check(np.all(np.triu(out, 1) == 0), f"{name} {sign}: nonzero above the diagonal")
                # numpy's own factor of the same matrix; a factor's forward error is bounded by
                # kappa_2 times the backward errors of both.
                reference = np.linalg.cholesky(target)
                kappa = np.linalg.cond(target).max()
                forward = (np.linalg.norm(o64 - reference, axis=(-2, -1)) / np.linalg.norm(reference, axis=(-2, -1))).max()
                check(forward <= 20 * n * eps * kappa, f"{name} {sign}: differs from numpy.linalg.cholesky by {forward:.3g}")
                if sign == "-":
                    back = (np.linalg.norm(o64 - b_factor.astype(np.complex128), axis=(-2, -1)) /
                            np.linalg.norm(b_factor.astype(np.complex128), axis=(-2, -1))).max()
                    check(back <= 20 * n * eps * kappa, f"{name}: downdate of B + V V^H by V is not B's factor ({back:.3g})")
                print(f"ok   {name:44s} {sign}  reconstruction {residual / eps:6.2f} eps  vs numpy {forward / eps:8.2f} eps"
                      f"  (tol {10 * n} eps, kappa {kappa:.1f})")
    # A downdate that fails in matrix 1 at numpy's column 2.
    factors = np.repeat((2.0 * np.eye(5))[None], 3, axis=0)
    v = np.zeros((3, 5, 1))
    v[:, 4, 0] = 1.0
    v[1, 2, 0] = 3.0
    np.save(path("fL.npy"), factors)
    np.save(path("fV.npy"), v)
    code, _, err = run(covflow, "linalg", "cholupdate", path("fL.npy"), path("fV.npy"), "--sign", "-", "--out", path("fL2.npy"))
    check(code == NUMERICAL, f"failing downdate: exit {code}, expected {NUMERICAL}: {err.strip()}")
    check("matrix 1 (not positive definite at column 2" in err, f"failing downdate: stderr does not name it: {err.strip()}")
    out = np.load(path("fL2.npy"))
    check(np.all(np.isnan(out[1])), "failing downdate: matrix 1 is not NaN in the output")
    good = np.linalg.cholesky(4 * np.eye(5) - v[0] @ v[0].T)
    check(np.abs(out[[0, 2]] - good).max() <= 10 * 5 * np.finfo(float).eps * 2, "failing downdate: the other factors are wrong")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    covflow = sys.argv[1]
    seed = int(os.environ.get("COVFLOW_TEST_SEED") or secrets.randbits(63))
    print(f"seed {seed} (replay with COVFLOW_TEST_SEED={seed}); numpy {np.__version__}")
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="covflow-heev-numpy-") as tmp:
        variants = ["C", "F", "big-endian", "v2.0", "v3.0"]
        case = 0
        for dtype in (np.complex128, np.complex64, np.float64, np.float32):
            for uplo in ("L", "U"):
                for kind in ("random", "clustered", "graded"):
                    for shape in ((5, 1, 1), (5, 2, 2), (7, 8, 8), (3, 33, 33), (9, 9)):
                        # Clustered and graded spectra need room: n ≥ 8 (each case is a process).
                        if kind != "random" and shape[-1] < 8:
                            continue
                        check_heev_case(covflow, tmp, rng, dtype, uplo, kind, shape, variants[(case + case // len(variants)) % len(variants)])
                        case += 1
        check_values_only(covflow, tmp, rng)
        check_non_finite(covflow, tmp, rng)
        check_errors(covflow, tmp)
        check_cholupdate(covflow, tmp, rng)
    if failures:
        print(f"{len(failures)} check(s) failed (seed {seed})")
        return 1
    print(f"all checks passed ({case} heev cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
