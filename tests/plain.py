"""Plain NumPy versions of Algorithms 1 and 2, written from the paper and fed the same random draws.

They use dense data and their own gradient formula, so they share nothing with isparse but the
random streams (numpy Generators spawned from the same seed, drawing U_i the same way).
"""

import numpy as np


def local_grad(A, b, rows, n, N, lam, x):
    Ai, bi = A[rows], b[rows]
    return (n / N) * (Ai.T @ (-bi / (1 + np.exp(bi * (Ai @ x))))) + lam * x


def draw(rng, m, tau_m, size, d):
    U = np.arange(m) if tau_m == m else np.sort(rng.choice(m, size=tau_m, replace=False))
    coords = (U[:, None] * size + np.arange(size)).ravel()
    return coords[coords < d]


def ibcd(A, b, parts, lam, size, tau_m, gamma, T, rngs):
    """Algorithm 1: x <- (1/n) sum_i (x - gamma (grad f_i(x))_{U_i})."""
    N, d = A.shape
    n, m = len(parts), -(-d // size)
    x, out = np.zeros(d), [np.zeros(d)]
    for _ in range(T):
        proposals = []
        for i in range(n):
            g = local_grad(A, b, parts[i], n, N, lam, x)
            c = draw(rngs[i], m, tau_m, size, d)
            xi = x.copy()
            xi[c] -= gamma * g[c]
            proposals.append(xi)
        x = np.mean(proposals, axis=0)
        out.append(x)
    return np.array(out)


def isega(A, b, parts, lam, size, tau_m, gamma, T, rngs, prox=lambda v, step: v):
    """Algorithm 2: g_i = h_i + (1/tau)(grad f_i - h_i)_{U_i}; h_i += (grad f_i - h_i)_{U_i}; x <- prox(x - gamma mean g_i)."""
    N, d = A.shape
    n, m = len(parts), -(-d // size)
    tau = tau_m / m
    h = np.zeros((n, d))
    x, out = np.zeros(d), [np.zeros(d)]
    for _ in range(T):
        gs = []
        for i in range(n):
            grad = local_grad(A, b, parts[i], n, N, lam, x)
            c = draw(rngs[i], m, tau_m, size, d)
            gi = h[i].copy()
            gi[c] += (grad[c] - h[i][c]) / tau
            h[i][c] = grad[c]
            gs.append(gi)
        x = prox(x - gamma * np.mean(gs, axis=0), gamma)
        out.append(x)
    return np.array(out)
