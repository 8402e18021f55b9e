#!/usr/bin/python3
"""End to end: `covflow linalg qr`, `covflow linalg svd` and `covflow linalg rsvd` against
numpy.linalg.qr(A, mode="reduced") and numpy.linalg.svd(A, full_matrices=False), with numpy writing
the inputs and reading the outputs.

usage: qr_svd_cli_numpy_test.py PATH/TO/covflow

Needs numpy (Debian's python3-numpy, so run it with /usr/bin/python3: a pyenv `python3` on PATH may
lack it). Without numpy it prints SKIPPED and exits 77, which CTest reports as skipped.

What is checked, for complex128, complex64, float64 and float32, (batch, m, n) and (m, n) inputs
with m > n, m = n and m < n, random matrices, and rank-deficient and graded ones of the tall,
wide and largest shapes:
  * Q, R, S, U and Vh have exactly the shapes and dtypes numpy returns, and every output file is
    byte for byte what numpy.save writes for it;
  * qr: ||Q R - A||_F <= 10 max(m, n) eps ||A||_F, ||Q^H Q - I||_F <= 10 max(m, n) eps, R exactly
    upper triangular, and (random inputs, full rank) R equal to numpy's up to the phase of each
    row, within 10 max(m, n) eps kappa_2(A) ||A||_F (QR is unique up to that phase);
  * svd: S non-negative, descending, and within 10 max(m, n) eps ||A||_2 of numpy's singular values;
    ||U diag(S) Vh - A||_F / ||A||_F, ||U^H U - I||_F and ||Vh Vh^H - I||_F <= 10 max(m, n) eps;
  * inputs numpy can write in other ways (Fortran order, big-endian, format versions 2.0 and 3.0)
    give the same results;
  * rsvd --rank 5 and --tol 1e-6 on exactly rank-5 inputs (complex128, float64): S, U and Vh in the
    shapes and dtypes of numpy's truncated to r columns (5, or min(m, n) for --tol, zero beyond the
    rank), R.npy an int32 array of 5s, every file numpy.save's bytes, S within 10 max(m, n) eps
    ||A||_2 of numpy's five singular values and ||U diag(S) Vh - A||_F / ||A||_F within the same;
  * a matrix with a NaN gives exit code 7, is named on stderr and is NaN in the outputs while the
    others are right; usage, shape, dtype and missing-file errors give their exit codes.
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


def numpy_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


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


def make_input(rng, kind, shape, dtype):
    complex_ = np.issubdtype(dtype, np.complexfloating)
    a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_ else 0)
    n = shape[-1]
    if kind == "rank-deficient" and n > 1:
        a[..., :, 1] = a[..., :, 0]
    elif kind == "graded":
        span = 6 if dtype in (np.float32, np.complex64) else 12
        a = a * np.logspace(0, -span, n, endpoint=False)
    return a.astype(dtype)


def hermitian(x):
    return np.conj(np.swapaxes(x, -1, -2))


def check_case(covflow, tmp, rng, dtype, kind, shape, variant):
    a = make_input(rng, kind, shape, dtype)
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    name = f"{np.dtype(dtype).name} {kind} {shape} {variant}"
    a_path, q_path, r_path, s_path, u_path, vh_path = (
        os.path.join(tmp, f) for f in ("a.npy", "q.npy", "r.npy", "s.npy", "u.npy", "vh.npy"))
    save_variant(a_path, a, variant)
    eps = np.finfo(dtype).eps
    tol = 10 * max(m, n) * eps
    a64 = a.astype(np.complex128).reshape(-1, m, n)
    norms = np.maximum(np.linalg.norm(a64, axis=(1, 2)), np.finfo(float).tiny)

    code, out, err = run(covflow, "linalg", "qr", a_path, "--q", q_path, "--r", r_path, "--device", "cpu")
    if check(code == OK, f"qr {name}: exit {code}: {err.strip()}"):
        q, r = np.load(q_path), np.load(r_path)
        q_np, r_np = np.linalg.qr(a, mode="reduced")
        check(q.shape == q_np.shape and q.dtype == q_np.dtype, f"qr {name}: Q is {q.shape} {q.dtype}, numpy {q_np.shape} {q_np.dtype}")
        check(r.shape == r_np.shape and r.dtype == r_np.dtype, f"qr {name}: R is {r.shape} {r.dtype}, numpy {r_np.shape} {r_np.dtype}")
        check(open(q_path, "rb").read() == numpy_bytes(q), f"qr {name}: Q.npy differs from numpy.save's bytes")
        check(open(r_path, "rb").read() == numpy_bytes(r), f"qr {name}: R.npy differs from numpy.save's bytes")
        q64, r64 = q.astype(np.complex128).reshape(-1, m, k), r.astype(np.complex128).reshape(-1, k, n)
        residual = (np.linalg.norm(q64 @ r64 - a64, axis=(1, 2)) / norms).max()
        orthogonality = np.linalg.norm(hermitian(q64) @ q64 - np.eye(k), axis=(1, 2)).max()
        check(residual <= tol, f"qr {name}: ||QR - A|| / ||A|| = {residual:.3g} > {tol:.3g}")
        check(orthogonality <= tol, f"qr {name}: ||Q^H Q - I|| = {orthogonality:.3g} > {tol:.3g}")
        check(np.all(np.tril(r64, -1) == 0), f"qr {name}: R has nonzeros below the diagonal")
        agreement = 0.0
        if kind == "random":
            # QR of a full-rank matrix is unique up to a unit-modulus factor per row of R.
            r_np64 = r_np.astype(np.complex128).reshape(-1, k, n)
            diag, diag_np = np.diagonal(r64, axis1=1, axis2=2), np.diagonal(r_np64, axis1=1, axis2=2)
            phase = np.where(diag_np != 0, diag / np.where(diag_np != 0, diag_np, 1), 1)
            phase = phase / np.maximum(np.abs(phase), np.finfo(float).tiny)
            kappa = np.linalg.cond(a64[:, :, :k] if m >= n else a64[:, :, :m]).max()
            agreement = (np.linalg.norm(r64 - phase[:, :, None] * r_np64, axis=(1, 2)) / norms).max()
            check(agreement <= tol * kappa, f"qr {name}: R differs from numpy's by {agreement:.3g} (kappa {kappa:.1f})")
        print(f"ok   qr  {name:52s} residual {residual / eps:6.2f} eps  orth {orthogonality / eps:6.2f} eps  "
              f"vs numpy {agreement / eps:8.2f} eps  (tol {tol / eps:.0f} eps)")

    code, out, err = run(covflow, "linalg", "svd", a_path, "--s", s_path, "--u", u_path, "--vh", vh_path, "--device", "cpu")
    if check(code == OK, f"svd {name}: exit {code}: {err.strip()}"):
        s, u, vh = np.load(s_path), np.load(u_path), np.load(vh_path)
        u_np, s_np, vh_np = np.linalg.svd(a, full_matrices=False)
        for got, want, what in ((s, s_np, "S"), (u, u_np, "U"), (vh, vh_np, "Vh")):
            check(got.shape == want.shape and got.dtype == want.dtype,
                  f"svd {name}: {what} is {got.shape} {got.dtype}, numpy {want.shape} {want.dtype}")
        for path, array, what in ((s_path, s, "S"), (u_path, u, "U"), (vh_path, vh, "Vh")):
            check(open(path, "rb").read() == numpy_bytes(array), f"svd {name}: {what}.npy differs from numpy.save's bytes")
        s64 = s.astype(np.float64).reshape(-1, k)
        u64, vh64 = u.astype(np.complex128).reshape(-1, m, k), vh.astype(np.complex128).reshape(-1, k, n)
        s_np64 = s_np.astype(np.float64).reshape(-1, k)
        value_error = (np.abs(s64 - s_np64).max(axis=1) / np.maximum(s_np64[:, 0], np.finfo(float).tiny)).max()
        residual = (np.linalg.norm((u64 * s64[:, None, :]) @ vh64 - a64, axis=(1, 2)) / norms).max()
        u_orth = np.linalg.norm(hermitian(u64) @ u64 - np.eye(k), axis=(1, 2)).max()
        v_orth = np.linalg.norm(vh64 @ hermitian(vh64) - np.eye(k), axis=(1, 2)).max()
        check(np.all(s64 >= 0) and np.all(np.diff(s64, axis=1) <= 0), f"svd {name}: S not non-negative and descending")
        check(value_error <= tol, f"svd {name}: singular values differ from numpy's by {value_error:.3g} ||A||_2 > {tol:.3g}")
        check(residual <= tol, f"svd {name}: ||U S Vh - A|| / ||A|| = {residual:.3g} > {tol:.3g}")
        check(u_orth <= tol and v_orth <= tol, f"svd {name}: orthogonality U {u_orth:.3g}, Vh {v_orth:.3g} > {tol:.3g}")
        print(f"ok   svd {name:52s} S vs numpy {value_error / eps:6.2f} eps  residual {residual / eps:6.2f} eps  "
              f"orth {max(u_orth, v_orth) / eps:6.2f} eps  (tol {tol / eps:.0f} eps)")


def check_non_finite(covflow, tmp, rng):
    a = make_input(rng, "random", (4, 6, 3), np.complex128)
    a[2, 5, 1] = np.nan
    paths = [os.path.join(tmp, f) for f in ("nan.npy", "nan_q.npy", "nan_r.npy", "nan_s.npy", "nan_u.npy", "nan_vh.npy")]
    np.save(paths[0], a)
    good = [0, 1, 3]
    code, _, err = run(covflow, "linalg", "qr", paths[0], "--q", paths[1], "--r", paths[2], "--device", "cpu")
    check(code == NUMERICAL, f"qr non-finite: exit {code}, expected {NUMERICAL}")
    check("1 of 4 matrices failed" in err and "matrix 2 (NaN or Inf in the matrix)" in err,
          f"qr non-finite: stderr does not name matrix 2: {err.strip()}")
    q, r = np.load(paths[1]), np.load(paths[2])
    check(np.all(np.isnan(q[2])) and np.all(np.isnan(r[2])), "qr non-finite: matrix 2 is not NaN in the outputs")
    check(np.abs(q[good] @ r[good] - a[good]).max() <= 1e-13 * np.abs(a[good]).max(), "qr non-finite: the others are wrong")
    code, _, err = run(covflow, "linalg", "svd", paths[0], "--s", paths[3], "--u", paths[4], "--vh", paths[5], "--device", "cpu")
    check(code == NUMERICAL, f"svd non-finite: exit {code}, expected {NUMERICAL}")
    check("matrix 2 (NaN or Inf in the matrix)" in err, f"svd non-finite: stderr does not name matrix 2: {err.strip()}")
    s = np.load(paths[3])
    check(np.all(np.isnan(s[2])), "svd non-finite: matrix 2 is not NaN in S")
    check(np.abs(s[good] - np.linalg.svd(a[good], compute_uv=False)).max() <= 1e-13 * np.abs(s[good]).max(),
          "svd non-finite: the others' singular values are wrong")


def check_rsvd(covflow, tmp, rng):
    m, n, rank = 40, 30, 5
    a_path, s_path, u_path, vh_path, ranks_path = (
        os.path.join(tmp, f) for f in ("rsvd_a.npy", "rsvd_s.npy", "rsvd_u.npy", "rsvd_vh.npy", "rsvd_ranks.npy"))
    for dtype in (np.complex128, np.float64):
        a = make_input(rng, "random", (3, m, rank), dtype) @ make_input(rng, "random", (3, rank, n), dtype)
        np.save(a_path, a)
        u_np, s_np, vh_np = np.linalg.svd(a, full_matrices=False)
        tol = 10 * max(m, n) * np.finfo(dtype).eps
        for mode, r in ((["--rank", rank], rank), (["--tol", "1e-6"], min(m, n))):
            name = f"rsvd {np.dtype(dtype).name} {' '.join(map(str, mode))}"
            code, out, err = run(covflow, "linalg", "rsvd", a_path, *mode, "--s", s_path, "--u", u_path, "--vh", vh_path,
                                 "--ranks", ranks_path, "--device", "cpu")
            if not check(code == OK, f"{name}: exit {code}: {err.strip()}"):
                continue
            s, u, vh, ranks = (np.load(p) for p in (s_path, u_path, vh_path, ranks_path))
            for got, want, what in ((s, s_np[:, :r], "S"), (u, u_np[:, :, :r], "U"), (vh, vh_np[:, :r, :], "Vh")):
                check(got.shape == want.shape and got.dtype == want.dtype,
                      f"{name}: {what} is {got.shape} {got.dtype}, numpy's truncated {want.shape} {want.dtype}")
            for path, array, what in ((s_path, s, "S"), (u_path, u, "U"), (vh_path, vh, "Vh"), (ranks_path, ranks, "R")):
                check(open(path, "rb").read() == numpy_bytes(array), f"{name}: {what}.npy differs from numpy.save's bytes")
            check(ranks.dtype == np.int32 and ranks.shape == (3,) and np.all(ranks == rank), f"{name}: ranks {ranks!r}")
            check(np.all(s[:, rank:] == 0) and np.all(u[:, :, rank:] == 0) and np.all(vh[:, rank:, :] == 0),
                  f"{name}: nonzeros beyond the rank")
            value_error = (np.abs(s[:, :rank] - s_np[:, :rank]).max(axis=1) / s_np[:, 0]).max()
            residual = (np.linalg.norm((u * s[:, None, :]) @ vh - a, axis=(1, 2)) / np.linalg.norm(a, axis=(1, 2))).max()
            check(value_error <= tol, f"{name}: S differs from numpy's by {value_error:.3g} ||A||_2 > {tol:.3g}")
            check(residual <= tol, f"{name}: ||U S Vh - A|| / ||A|| = {residual:.3g} > {tol:.3g}")
            eps = np.finfo(dtype).eps
            print(f"ok   {name:52s} S vs numpy {value_error / eps:6.2f} eps  residual {residual / eps:6.2f} eps  "
                  f"(tol {tol / eps:.0f} eps)")


def check_errors(covflow, tmp):
    def path(name):
        return os.path.join(tmp, name)
    np.save(path("int.npy"), np.zeros((3, 3), np.int32))
    np.save(path("rank4.npy"), np.zeros((1, 2, 2, 2)))
    np.save(path("ok.npy"), np.eye(3))
    with open(path("ok.npy"), "rb") as f:
        data = f.read()
    with open(path("short.npy"), "wb") as f:
        f.write(data[:-8])
    cases = [
        ("qr without outputs", ["linalg", "qr", path("ok.npy")], USAGE, "--q, --r"),
        ("svd without --s", ["linalg", "svd", path("ok.npy")], USAGE, "--s"),
        ("qr int32", ["linalg", "qr", path("int.npy"), "--r", path("r.npy")], INPUT, "int32"),
        ("svd rank 4", ["linalg", "svd", path("rank4.npy"), "--s", path("s.npy")], INPUT, "(4 dimensions)"),
        ("qr truncated", ["linalg", "qr", path("short.npy"), "--r", path("r.npy")], INPUT, "bytes follow the header"),
        ("svd missing", ["linalg", "svd", path("absent.npy"), "--s", path("s.npy")], IO, "cannot open"),
        ("qr unwritable", ["linalg", "qr", path("ok.npy"), "--q", path("no/such/dir/q.npy")], IO, "cannot create"),
        ("rsvd without --rank or --tol", ["linalg", "rsvd", path("ok.npy"), "--s", path("s.npy")], USAGE, "--rank"),
    ]
    for name, args, expected, phrase in cases:
        code, _, err = run(covflow, *args)
        check(code == expected, f"{name}: exit {code}, expected {expected}: {err.strip()}")
        check(phrase in err, f"{name}: stderr lacks {phrase!r}: {err.strip()}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    covflow = sys.argv[1]
    seed = int(os.environ.get("COVFLOW_TEST_SEED") or secrets.randbits(63))
    print(f"seed {seed} (replay with COVFLOW_TEST_SEED={seed}); numpy {np.__version__}")
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="covflow-qr-svd-numpy-") as tmp:
        variants = ["C", "F", "big-endian", "v2.0", "v3.0"]
        case = 0
        for dtype in (np.complex128, np.complex64, np.float64, np.float32):
            for kind in ("random", "rank-deficient", "graded"):
                for shape in ((5, 9, 4), (5, 4, 9), (3, 6, 6), (7, 3), (2, 8), (3, 40, 33), (2, 1, 5)):
                    # Rank-deficient and graded on the tall, wide and larger shapes (each case
                    # is two processes: CI time); random on every shape.
                    if kind != "random" and shape not in ((5, 9, 4), (5, 4, 9), (3, 40, 33)):
                        continue
                    check_case(covflow, tmp, rng, dtype, kind, shape, variants[(case + case // len(variants)) % len(variants)])
                    case += 1
        check_non_finite(covflow, tmp, rng)
        check_rsvd(covflow, tmp, rng)
        check_errors(covflow, tmp)
    if failures:
        print(f"{len(failures)} check(s) failed (seed {seed})")
        return 1
    print(f"all checks passed ({case} cases, qr and svd each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
