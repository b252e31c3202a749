#!/usr/bin/env python3
"""Sample-quality statistics over a classifier's outputs, in plain numpy (no PyTorch, no scipy).

  frechet_distance(mu1, sigma1, mu2, sigma2)
      |mu1 - mu2|^2 + tr(S1) + tr(S2) - 2 tr((S1^1/2 S2 S1^1/2)^1/2), the Frechet distance of
      two Gaussians. tr((S1 S2)^1/2) is computed from the symmetric form S1^1/2 S2 S1^1/2, whose
      eigenvalues are those of S1 S2 but which eigh handles stably; eigenvalues that rounding
      pushes below zero are clipped to zero (the matrices are PSD in exact arithmetic).
  feature_statistics(features)      mean and unbiased covariance (float64) of N x D features
  inception_score(probs, splits)    exp(E_x[KL(p(y|x) || p(y))]) over `splits` equal parts, mean
                                    and standard deviation over the parts (Salimans et al.'s
                                    protocol, on our classifier's softmax)
  class_histogram_entropy(probs)    entropy of the histogram of argmax classes divided by
                                    log(classes): 1 when every class is predicted equally often,
                                    0 when one class takes everything (mode collapse)

  python3 tools/quality/metrics.py --self-test    checks each against a closed form
"""
import argparse
import sys

import numpy as np


def feature_statistics(features):
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"features must be N x D with N >= 2, got shape {x.shape}")
    return x.mean(axis=0), np.cov(x, rowvar=False)


def _psd_sqrt(sym):
    """Square root of a symmetric PSD matrix by eigen-decomposition."""
    sym = (sym + sym.T) / 2  # exact symmetry for eigh; rounding can break it
    w, v = np.linalg.eigh(sym)
    return (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T


def trace_sqrt_product(sigma1, sigma2):
    """tr((sigma1 sigma2)^1/2) for symmetric PSD matrices."""
    root1 = _psd_sqrt(np.asarray(sigma1, dtype=np.float64))
    middle = root1 @ np.asarray(sigma2, dtype=np.float64) @ root1
    w = np.linalg.eigvalsh((middle + middle.T) / 2)
    return float(np.sqrt(np.clip(w, 0.0, None)).sum())


def frechet_distance(mu1, sigma1, mu2, sigma2):
    mu1, mu2 = np.asarray(mu1, dtype=np.float64), np.asarray(mu2, dtype=np.float64)
    sigma1, sigma2 = np.asarray(sigma1, dtype=np.float64), np.asarray(sigma2, dtype=np.float64)
    if mu1.shape != mu2.shape or sigma1.shape != sigma2.shape or sigma1.shape != mu1.shape * 2:
        raise ValueError(f"shapes disagree: mu {mu1.shape} {mu2.shape}, sigma {sigma1.shape} {sigma2.shape}")
    diff = mu1 - mu2
    value = diff @ diff + np.trace(sigma1) + np.trace(sigma2) - 2.0 * trace_sqrt_product(sigma1, sigma2)
    # Rounding can leave a tiny negative value for (nearly) equal Gaussians.
    return max(float(value), 0.0)


def frechet_distance_of_features(features1, features2):
    return frechet_distance(*feature_statistics(features1), *feature_statistics(features2))


def inception_score(probs, splits=10):
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] < splits:
        raise ValueError(f"probs must be N x classes with N >= splits ({splits}), got shape {p.shape}")
    scores = []
    for part in np.array_split(p, splits):
        marginal = part.mean(axis=0, keepdims=True)
        # 0 log 0 = 0: a class with p(y|x) = 0 adds nothing.
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(part > 0, part * (np.log(part) - np.log(marginal)), 0.0)
        scores.append(np.exp(terms.sum(axis=1).mean()))
    return float(np.mean(scores)), float(np.std(scores))


def class_histogram_entropy(probs):
    p = np.asarray(probs)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"probs must be N x classes with classes >= 2, got shape {p.shape}")
    counts = np.bincount(p.argmax(axis=1), minlength=p.shape[1]).astype(np.float64)
    freq = counts[counts > 0] / counts.sum()
    return float(-(freq * np.log(freq)).sum() / np.log(p.shape[1])) + 0.0  # + 0.0: no -0.0


def _self_test():
    rng = np.random.default_rng(7)
    failures = []

    def expect(name, got, want, tol):
        ok = abs(got - want) <= tol
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {got:.10g} (expected {want:.10g}, tolerance {tol:g})")
        if not ok:
            failures.append(name)

    d = 64
    a = rng.standard_normal((d, d))
    sigma = a @ a.T / d + 0.1 * np.eye(d)
    mu = rng.standard_normal(d)
    shift = rng.standard_normal(d)
    expect("FD of identical Gaussians", frechet_distance(mu, sigma, mu, sigma), 0.0, 1e-8)
    expect("FD of shifted Gaussians = |mu1 - mu2|^2", frechet_distance(mu, sigma, mu + shift, sigma),
           float(shift @ shift), 1e-8)
    # Commuting (diagonal) covariances: FD = |dmu|^2 + sum (sqrt(a_i) - sqrt(b_i))^2.
    va, vb = rng.uniform(0.1, 3.0, d), rng.uniform(0.1, 3.0, d)
    expect("FD of diagonal Gaussians", frechet_distance(mu, np.diag(va), mu + shift, np.diag(vb)),
           float(shift @ shift + ((np.sqrt(va) - np.sqrt(vb)) ** 2).sum()), 1e-8)
    # The same pair after one rotation of both: the distance is rotation invariant.
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    expect("FD after a common rotation", frechet_distance(q @ mu, q @ np.diag(va) @ q.T, q @ (mu + shift),
                                                          q @ np.diag(vb) @ q.T),
           float(shift @ shift + ((np.sqrt(va) - np.sqrt(vb)) ** 2).sum()), 1e-8)
    b = rng.standard_normal((d, d))
    sigma2 = b @ b.T / d
    fd12 = frechet_distance(mu, sigma, shift, sigma2)
    expect("FD is symmetric", frechet_distance(shift, sigma2, mu, sigma), fd12, 1e-8 * max(1.0, fd12))
    # Rank-deficient covariances (fewer samples than dimensions): the zero eigenvalues come out
    # of eigh as +-1e-16, whose square roots (1e-8) bound the accuracy here.
    few = rng.standard_normal((20, d))
    fd_few = frechet_distance_of_features(few, few + 1.0)
    expect("FD of rank-deficient covariances, shifted by 1 in each dimension", fd_few, float(d), 1e-4)
    try:
        import scipy.linalg
    except ImportError:
        print("skip FD against scipy.linalg.sqrtm: scipy is not installed")
    else:
        covmean = scipy.linalg.sqrtm(sigma @ sigma2)
        covmean = covmean.real if np.iscomplexobj(covmean) else covmean
        diff = mu - shift
        want = float(diff @ diff + np.trace(sigma) + np.trace(sigma2) - 2 * np.trace(covmean))
        expect("FD against scipy.linalg.sqrtm", fd12, want, 1e-6 * max(1.0, want))
    # Features drawn from known Gaussians: the estimate converges to the closed form.
    n = 200000
    x1 = rng.standard_normal((n, 4)) * np.sqrt([1.0, 2.0, 0.5, 1.0])
    x2 = rng.standard_normal((n, 4)) * np.sqrt([1.0, 0.5, 2.0, 4.0]) + [1.0, 0.0, 0.0, 0.0]
    want = 1.0 + ((np.sqrt([1.0, 2.0, 0.5, 1.0]) - np.sqrt([1.0, 0.5, 2.0, 4.0])) ** 2).sum()
    expect("FD estimated from samples", frechet_distance_of_features(x1, x2), float(want), 0.02)

    classes = 10
    one_hot = np.eye(classes)[np.arange(1000) % classes]
    mean, std = inception_score(one_hot, splits=10)
    expect("IS of confident predictions, classes uniform", mean, 10.0, 1e-9)
    expect("IS standard deviation over the splits", std, 0.0, 1e-9)
    constant = np.tile(rng.dirichlet(np.ones(classes)), (1000, 1))
    expect("IS of one constant prediction", inception_score(constant)[0], 1.0, 1e-9)
    expect("IS of confident predictions, one class", inception_score(np.eye(classes)[np.zeros(1000, int)])[0], 1.0,
           1e-9)
    # Confident predictions over k of the classes, evenly: IS = k.
    expect("IS of confident predictions over 4 classes", inception_score(np.eye(classes)[np.arange(1000) % 4])[0],
           4.0, 1e-9)
    expect("class-histogram entropy, uniform", class_histogram_entropy(one_hot), 1.0, 1e-12)
    expect("class-histogram entropy, one class", class_histogram_entropy(np.eye(classes)[np.zeros(50, int)]), 0.0,
           1e-12)
    two = np.eye(classes)[np.arange(1000) % 2]
    expect("class-histogram entropy, two classes", class_histogram_entropy(two), np.log(2) / np.log(classes), 1e-12)

    for name, call in (("FD with mismatched shapes", lambda: frechet_distance(mu, sigma, mu[:3], sigma)),
                       ("IS with fewer samples than splits", lambda: inception_score(one_hot[:5]))):
        try:
            call()
        except ValueError as e:
            print(f"ok   {name} is refused: {e}")
        else:
            print(f"FAIL {name} was accepted")
            failures.append(name)
    if failures:
        print(f"metrics self-test: {len(failures)} FAILED: {', '.join(failures)}")
        return 1
    print("metrics self-test: passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--self-test", action="store_true", help="check the statistics against closed forms")
    args = ap.parse_args()
    if not args.self_test:
        ap.print_help()
        return 2
    return _self_test()


if __name__ == "__main__":
    sys.exit(main())
